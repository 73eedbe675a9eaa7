//! Decoding a large JSON document one array element at a time.
//!
//! At 10,000 nodes `scontrol --json show nodes` prints ~23 MB on 24.11, and 22.05's `sinfo
//! --json` ~12.6 MB. Held whole, a document would be most of the daemon's memory; decoded by
//! `serde_json::from_reader` it costs about twice the CPU of this module (release build, 2 loaded
//! cores: 24.11 ~115 ms against ~180 ms, 22.05 ~55 ms against ~115 ms). So the document is read as
//! it streams: the top-level keys asked for are found, each element of their arrays is cut out of
//! the stream (only strings and nesting are tracked, strings skipped eight bytes at a time) and
//! handed to `serde_json::from_slice`. One element is held at a time; everything else is skipped
//! without being decoded.

use std::io::BufRead;

/// Reads the JSON object of `reader` and calls `each(key, index, bytes)` for every element of
/// the arrays under the top-level `keys` (in document order). Returns which keys were found.
/// Errors say what was wrong and at which byte of the output.
pub(crate) fn for_each_element(
    reader: &mut dyn BufRead,
    keys: &[&str],
    mut each: impl FnMut(usize, usize, &[u8]) -> Result<(), String>,
) -> Result<Vec<bool>, String> {
    let mut r = Reader { inner: reader, offset: 0 };
    let mut found = vec![false; keys.len()];
    match r.next_token()? {
        Some(b'{') => {}
        Some(other) => return Err(format!("expected a JSON object, found {} at byte 0", shown(other))),
        None => return Err("no output".into()),
    }
    let mut key = Vec::new();
    let mut element = Vec::new();
    let mut first = true;
    loop {
        match r.next_token()? {
            Some(b'}') if first => break,
            Some(b'"') => {}
            Some(other) => return Err(r.unexpected(other, "a key")),
            None => return Err(r.eof()),
        }
        key.clear();
        r.value(Some(&mut key), Some(b'"'))?;
        key.pop(); // the closing quote
        match r.next_token()? {
            Some(b':') => {}
            Some(other) => return Err(r.unexpected(other, "`:`")),
            None => return Err(r.eof()),
        }
        let wanted = keys.iter().position(|k| k.as_bytes() == key.as_slice());
        match (wanted, r.next_token()?) {
            (Some(k), Some(b'[')) => {
                found[k] = true;
                let mut index = 0;
                loop {
                    match r.next_token()? {
                        Some(b']') if index == 0 => break,
                        Some(start) => {
                            element.clear();
                            element.push(start);
                            r.value(Some(&mut element), Some(start))?;
                            each(k, index, &element)?;
                            index += 1;
                        }
                        None => return Err(r.eof()),
                    }
                    match r.next_token()? {
                        Some(b',') => {}
                        Some(b']') => break,
                        Some(other) => return Err(r.unexpected(other, "`,` or `]`")),
                        None => return Err(r.eof()),
                    }
                }
            }
            (Some(k), Some(other)) => {
                return Err(format!("`{}` is not an array: it starts with {}", keys[k], shown(other)))
            }
            (None, Some(start)) => r.value(None, Some(start))?,
            (_, None) => return Err(r.eof()),
        }
        first = false;
        match r.next_token()? {
            Some(b',') => {}
            Some(b'}') => break,
            Some(other) => return Err(r.unexpected(other, "`,` or `}`")),
            None => return Err(r.eof()),
        }
    }
    match r.next_token()? {
        None => Ok(found),
        Some(other) => Err(r.unexpected(other, "the end of the output")),
    }
}

fn shown(byte: u8) -> String {
    if byte.is_ascii_graphic() {
        format!("`{}`", byte as char)
    } else {
        format!("byte 0x{byte:02x}")
    }
}

struct Reader<'a> {
    inner: &'a mut dyn BufRead,
    /// Bytes consumed so far.
    offset: u64,
}

impl Reader<'_> {
    fn unexpected(&self, byte: u8, expected: &str) -> String {
        format!("expected {expected}, found {} at byte {}", shown(byte), self.offset.saturating_sub(1))
    }

    fn eof(&self) -> String {
        format!("the output ends too early (after {} bytes)", self.offset)
    }

    fn buf(&mut self) -> Result<&[u8], String> {
        self.inner.fill_buf().map_err(|e| format!("reading the output: {e}"))
    }

    /// The next byte that is not JSON whitespace, consumed; `None` at the end.
    fn next_token(&mut self) -> Result<Option<u8>, String> {
        loop {
            let buf = self.buf()?;
            if buf.is_empty() {
                return Ok(None);
            }
            match buf.iter().position(|b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t')) {
                Some(at) => {
                    let byte = buf[at];
                    self.inner.consume(at + 1);
                    self.offset += at as u64 + 1;
                    return Ok(Some(byte));
                }
                None => {
                    let n = buf.len();
                    self.inner.consume(n);
                    self.offset += n as u64;
                }
            }
        }
    }

    /// The rest of a value whose first byte `start` was just consumed: a string, an object or
    /// array (nesting and strings tracked), or a bare word (number, `true`, ...). Its bytes are
    /// appended to `keep` when given. A bare word ends before the delimiter that follows it.
    fn value(&mut self, mut keep: Option<&mut Vec<u8>>, start: Option<u8>) -> Result<(), String> {
        let mut scan = Scan::new(start.unwrap_or(b' '));
        if scan.done {
            return Ok(());
        }
        loop {
            let buf = self.buf()?;
            if buf.is_empty() {
                // A bare word may end the output; anything else may not.
                return if scan.word { Ok(()) } else { Err(self.eof()) };
            }
            let (used, done) = scan.feed(buf);
            if let Some(keep) = keep.as_deref_mut() {
                keep.extend_from_slice(&buf[..used]);
            }
            self.inner.consume(used);
            self.offset += used as u64;
            if done {
                return Ok(());
            }
        }
    }
}

/// Where the end of one JSON value is, fed a chunk at a time.
struct Scan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// A bare word: ends at whitespace or a delimiter.
    word: bool,
    done: bool,
}

impl Scan {
    fn new(start: u8) -> Scan {
        let mut scan = Scan { depth: 0, in_string: false, escaped: false, word: false, done: false };
        match start {
            b'"' => scan.in_string = true,
            b'{' | b'[' => scan.depth = 1,
            _ => scan.word = true,
        }
        scan
    }

    /// Consumes from `buf` up to the end of the value; returns (bytes used, whether it ended).
    fn feed(&mut self, buf: &[u8]) -> (usize, bool) {
        let mut i = 0;
        if self.word {
            return match buf
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
            {
                Some(end) => {
                    self.done = true;
                    (end, true)
                }
                None => (buf.len(), false),
            };
        }
        while i < buf.len() {
            if self.escaped {
                self.escaped = false;
                i += 1;
            } else if self.in_string {
                // Most of a document is strings: jump to the next quote or backslash.
                match find_quote_or_backslash(&buf[i..]) {
                    None => return (buf.len(), false),
                    Some(at) => {
                        i += at;
                        if buf[i] == b'\\' {
                            self.escaped = true;
                        } else {
                            self.in_string = false;
                            if self.depth == 0 {
                                self.done = true;
                                return (i + 1, true);
                            }
                        }
                        i += 1;
                    }
                }
            } else {
                match buf[i] {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth -= 1;
                        if self.depth == 0 {
                            self.done = true;
                            return (i + 1, true);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        (buf.len(), false)
    }
}

/// The first `"` or `\\` of `hay`, eight bytes at a time.
fn find_quote_or_backslash(hay: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const QUOTES: u64 = ONES * b'"' as u64;
    const BACKSLASHES: u64 = ONES * b'\\' as u64;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let mut chunks = hay.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        if has_zero(word ^ QUOTES) | has_zero(word ^ BACKSLASHES) != 0 {
            return chunk.iter().position(|&b| b == b'"' || b == b'\\').map(|p| at + p);
        }
        at += 8;
    }
    chunks.remainder().iter().position(|&b| b == b'"' || b == b'\\').map(|p| at + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (key, index, text) of one element.
    type Element = (usize, usize, String);

    /// Every element of the wanted arrays, as text, read through a buffer of `capacity` bytes.
    fn elements(doc: &str, keys: &[&str], capacity: usize) -> Result<(Vec<Element>, Vec<bool>), String> {
        let mut got = Vec::new();
        let mut reader = std::io::BufReader::with_capacity(capacity, doc.as_bytes());
        let found = for_each_element(&mut reader, keys, |k, i, bytes| {
            got.push((k, i, String::from_utf8(bytes.to_vec()).unwrap()));
            Ok(())
        })?;
        Ok((got, found))
    }

    #[test]
    fn cuts_elements_out_whatever_the_buffer_size() {
        let doc = r#" {"meta": {"a": [1, {"b": "]}"}]}, "n": 3, "s": "x\"y", "t": true,
            "nodes": [ {"name": "a}\\", "x": [1, 2]} , {"name": "b"}, "str\"", 42, null, [] ],
            "empty": [], "sinfo": [{"g": {}}] } "#;
        let want = vec![
            (0, 0, r#"{"name": "a}\\", "x": [1, 2]}"#.to_string()),
            (0, 1, r#"{"name": "b"}"#.to_string()),
            (0, 2, r#""str\"""#.to_string()),
            (0, 3, "42".to_string()),
            (0, 4, "null".to_string()),
            (0, 5, "[]".to_string()),
            (1, 0, r#"{"g": {}}"#.to_string()),
        ];
        for capacity in [1, 2, 3, 7, 64, 8192] {
            let (got, found) = elements(doc, &["nodes", "sinfo", "missing", "empty"], capacity).unwrap();
            assert_eq!(got, want, "capacity {capacity}");
            assert_eq!(found, vec![true, true, false, true]);
        }
        assert_eq!(elements("{}", &["nodes"], 8).unwrap(), (vec![], vec![false]));
        assert_eq!(elements(r#"{"n":1}"#, &["nodes"], 1).unwrap(), (vec![], vec![false]));
    }

    #[test]
    fn finds_quotes_and_backslashes_anywhere_in_a_word() {
        for len in 0..20 {
            for at in 0..len {
                for target in [b'"', b'\\'] {
                    let mut hay = vec![b'x'; len];
                    hay[at] = target;
                    assert_eq!(find_quote_or_backslash(&hay), Some(at), "{len} {at}");
                    if at + 1 < len {
                        hay[at + 1] = b'"';
                        assert_eq!(find_quote_or_backslash(&hay), Some(at));
                    }
                }
            }
            assert_eq!(find_quote_or_backslash(&vec![b'a'; len]), None);
        }
        // Bytes around the targets' values (0x22, 0x5c) and high bytes are not matches.
        let near: Vec<u8> = [0x21u8, 0x23, 0x5b, 0x5d, 0xa2, 0xdc, 0xff, 0x00, 0x01, 0x80].repeat(3);
        assert_eq!(find_quote_or_backslash(&near), None);
    }

    #[test]
    fn malformed_documents_say_where() {
        let cases = [
            ("", "no output"),
            ("   ", "no output"),
            ("[]", "expected a JSON object, found `[` at byte 0"),
            ("not json", "expected a JSON object, found `n` at byte 0"),
            ("{", "ends too early (after 1 bytes)"),
            (r#"{"nodes":{}}"#, "`nodes` is not an array: it starts with `{`"),
            (r#"{"nodes":[{"a":1}"#, "ends too early"),
            (r#"{"nodes":[{"a":1} {"b":2}]}"#, "expected `,` or `]`, found `{` at byte 18"),
            (r#"{"nodes":[{"a":"#, "ends too early"),
            (r#"{"a" 1}"#, "expected `:`, found `1` at byte 5"),
            (r#"{"a":1 "b":2}"#, "expected `,` or `}`, found `\"` at byte 7"),
            (r#"{1:2}"#, "expected a key, found `1` at byte 1"),
            (r#"{"nodes":[]} x"#, "expected the end of the output, found `x` at byte 13"),
        ];
        for (doc, want) in cases {
            let err = elements(doc, &["nodes"], 4).unwrap_err();
            assert!(err.contains(want), "{doc:?}: {err}");
        }
        let mut reader = std::io::BufReader::new(&br#"{"nodes":[1,2]}"#[..]);
        let err = for_each_element(
            &mut reader,
            &["nodes"],
            |_, i, _| if i == 1 { Err("bad".into()) } else { Ok(()) },
        );
        assert_eq!(err.unwrap_err(), "bad");
    }
}
