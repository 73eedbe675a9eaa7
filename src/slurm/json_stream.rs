//! Decoding a large JSON document one array element at a time.
//!
//! At 10,000 nodes `scontrol --json show nodes` prints ~23 MB on 24.11, and 22.05's `sinfo
//! --json` ~12.6 MB. Held whole, a document would be most of the daemon's memory; decoded by
//! `serde_json::from_reader` it costs about twice the CPU of this module (release build, 2 loaded
//! cores: 24.11 ~115 ms against ~180 ms, 22.05 ~55 ms against ~115 ms). So the document is read as
//! it streams: the top-level keys asked for are found, each element of their arrays is cut out of
//! the stream (only strings and nesting are tracked: the next quote, backslash or bracket is found
//! sixteen bytes at a time with SSE2, eight at a time elsewhere), reduced to the fields asked for
//! ([`only_fields`]) and handed to `serde_json::from_slice`. One element is held at a time;
//! everything else is skipped without being decoded.

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

/// Writes into `out` the JSON object `element` with only its top-level `fields` (in the element's
/// order), so that a node of ~1.4 KB is decoded from the hundred bytes a pass reads: every other
/// value is skipped as [`for_each_element`] skips, never decoded, and once every field is found the
/// rest of the element is not looked at (Slurm prints the fields a pass reads in the first two
/// thirds of a node).
/// Keys are compared as printed (Slurm's keys hold no escapes). An element that is not an object is
/// copied whole, for the decoder to say what it is instead.
pub(crate) fn only_fields(element: &[u8], fields: &[&str], out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    let ws = |b: &u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t');
    let skip_ws = |at: usize| at + element[at..].iter().take_while(|b| ws(b)).count();
    let mut at = skip_ws(0);
    if element.get(at) != Some(&b'{') {
        out.extend_from_slice(element);
        return Ok(());
    }
    let cut = |why: &str| format!("a node's object is cut short ({why})");
    // Which of `fields` were kept, one bit each.
    assert!(fields.len() < 64, "at most 63 fields");
    let all = (1u64 << fields.len()) - 1;
    let mut found = 0u64;
    out.push(b'{');
    at = skip_ws(at + 1);
    if element.get(at) == Some(&b'}') {
        out.push(b'}');
        return Ok(());
    }
    loop {
        // The key: a string.
        if element.get(at) != Some(&b'"') {
            return Err(cut("a key"));
        }
        let key_start = at + 1;
        let key_len = {
            let mut scan = Scan::new(b'"');
            match scan.feed(&element[key_start..]) {
                (used, true) => used - 1,
                _ => return Err(cut("a key")),
            }
        };
        let key = &element[key_start..key_start + key_len];
        at = skip_ws(key_start + key_len + 1);
        if element.get(at) != Some(&b':') {
            return Err(cut("`:`"));
        }
        at = skip_ws(at + 1);
        let Some(&start) = element.get(at) else { return Err(cut("a value")) };
        let mut scan = Scan::new(start);
        let end = match scan.feed(&element[at + 1..]) {
            (used, true) => at + 1 + used,
            // A bare word may end the element only if nothing follows it; an object never does.
            _ => return Err(cut("a value")),
        };
        // The first byte first: most keys differ there, and a slice compare is a `memcmp` call.
        let wanted = |f: &&str| f.as_bytes().first() == key.first() && f.as_bytes() == key;
        if let Some(f) = fields.iter().position(wanted) {
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(&element[key_start - 1..key_start + key_len + 1]);
            out.push(b':');
            out.extend_from_slice(&element[at..end]);
            found |= 1 << f;
            if found == all {
                // The rest is not read: the element's nesting and strings were checked when it was
                // cut out of the stream, and nothing after this is kept.
                out.push(b'}');
                return Ok(());
            }
        }
        at = skip_ws(end);
        match element.get(at) {
            Some(b',') => at = skip_ws(at + 1),
            Some(b'}') => {
                out.push(b'}');
                return Ok(());
            }
            _ => return Err(cut("`,` or `}`")),
        }
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
                // Between strings only `"`, `{`, `}`, `[` and `]` matter: jump to the next one (a
                // pretty-printed document is mostly indentation and numbers there).
                match find_structural(&buf[i..]) {
                    None => return (buf.len(), false),
                    Some(at) => i += at,
                }
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

/// The first `"`, `{`, `}`, `[` or `]` of `hay`: sixteen bytes at a time where SSE2 is (every
/// x86_64), then eight at a time ([`find_structural_swar`]).
fn find_structural(hay: &[u8]) -> Option<usize> {
    match sse2::structural_chunks(hay) {
        Err(found) => Some(found),
        Ok(at) => find_structural_swar(&hay[at..]).map(|p| at + p),
    }
}

/// The first `"` or `\\` of `hay`, as [`find_structural`] finds structure.
fn find_quote_or_backslash(hay: &[u8]) -> Option<usize> {
    match sse2::quote_or_backslash_chunks(hay) {
        Err(found) => Some(found),
        Ok(at) => find_quote_or_backslash_swar(&hay[at..]).map(|p| at + p),
    }
}

/// Sixteen bytes at a time. Each function looks at the whole 16-byte chunks of `hay` and returns
/// `Err(i)` for the first match, at `i`, or `Ok(n)`: none in the first `n` bytes, the rest left to
/// the eight-byte scan.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };

    // SAFETY (every `unsafe` here): SSE2 is in every x86_64 CPU (the target's baseline), and each
    // load is unaligned and reads 16 bytes inside `hay` (`at + 16 <= hay.len()`).

    pub(super) fn structural_chunks(hay: &[u8]) -> Result<usize, usize> {
        // SAFETY: above.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let open = _mm_set1_epi8(b'{' as i8);
            let close = _mm_set1_epi8(b'}' as i8);
            // `[`/`{` and `]`/`}` differ only in bit 0x20.
            let case = _mm_set1_epi8(0x20);
            first_hit(hay, |v| {
                let folded = _mm_or_si128(v, case);
                _mm_or_si128(
                    _mm_cmpeq_epi8(v, quote),
                    _mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close)),
                )
            })
        }
    }

    pub(super) fn quote_or_backslash_chunks(hay: &[u8]) -> Result<usize, usize> {
        // SAFETY: above.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            first_hit(hay, |v| _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)))
        }
    }

    /// The whole 16-byte chunks of `hay`, each given to `hits` (a byte of its answer set where the
    /// chunk's byte matches).
    #[inline(always)]
    fn first_hit(hay: &[u8], hits: impl Fn(__m128i) -> __m128i) -> Result<usize, usize> {
        let mut at = 0;
        while at + 16 <= hay.len() {
            // SAFETY: above.
            let mask =
                unsafe { _mm_movemask_epi8(hits(_mm_loadu_si128(hay.as_ptr().add(at).cast::<__m128i>()))) };
            if mask != 0 {
                return Err(at + mask.trailing_zeros() as usize);
            }
            at += 16;
        }
        Ok(at)
    }
}

/// Elsewhere the eight-byte scans do it all.
#[cfg(not(target_arch = "x86_64"))]
mod sse2 {
    pub(super) fn structural_chunks(_: &[u8]) -> Result<usize, usize> {
        Ok(0)
    }

    pub(super) fn quote_or_backslash_chunks(_: &[u8]) -> Result<usize, usize> {
        Ok(0)
    }
}

/// The first `"`, `{`, `}`, `[` or `]` of `hay`, eight bytes at a time (`[`/`{` and `]`/`}` differ
/// only in bit 0x20).
fn find_structural_swar(hay: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const CASE: u64 = ONES * 0x20;
    const QUOTES: u64 = ONES * b'"' as u64;
    const OPENS: u64 = ONES * b'{' as u64;
    const CLOSES: u64 = ONES * b'}' as u64;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let wanted = |b: u8| matches!(b, b'"' | b'{' | b'}' | b'[' | b']');
    let mut chunks = hay.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let folded = word | CASE;
        if has_zero(word ^ QUOTES) | has_zero(folded ^ OPENS) | has_zero(folded ^ CLOSES) != 0 {
            return chunk.iter().position(|&b| wanted(b)).map(|p| at + p);
        }
        at += 8;
    }
    chunks.remainder().iter().position(|&b| wanted(b)).map(|p| at + p)
}

/// The first `"` or `\\` of `hay`, eight bytes at a time.
fn find_quote_or_backslash_swar(hay: &[u8]) -> Option<usize> {
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
    fn only_the_fields_asked_for_are_kept() {
        let keep = |e: &str| {
            let mut out = Vec::new();
            only_fields(e.as_bytes(), &["name", "state", "n"], &mut out)
                .map(|()| String::from_utf8(out).unwrap())
        };
        let element = r#"{ "x": {"name": "no", "a": [1, "}"]}, "name" : "a\"b}",
            "skip": "s\\", "state": ["IDLE", "CLOUD"], "num": -1.5e3, "n": 7, "t": true }"#;
        assert_eq!(keep(element).unwrap(), r#"{"name":"a\"b}","state":["IDLE", "CLOUD"],"n":7}"#);
        assert_eq!(keep(r#"{"other": null}"#).unwrap(), "{}");
        assert_eq!(keep(" { } ").unwrap(), "{}");
        assert_eq!(keep(r#"{"n":1}"#).unwrap(), r#"{"n":1}"#);
        // Once every field is kept, the rest is not read (it was checked when cut out of the stream).
        assert_eq!(keep(r#"{"n":1,"state":2,"name":3,"x" 4}"#).unwrap(), r#"{"n":1,"state":2,"name":3}"#);
        // A field given twice before the others is kept twice, for the decoder to refuse.
        assert_eq!(
            keep(r#"{"n":1,"n":2,"state":3,"name":4}"#).unwrap(),
            r#"{"n":1,"n":2,"state":3,"name":4}"#
        );
        // Not an object: copied for the decoder to refuse.
        assert_eq!(keep(r#""str""#).unwrap(), r#""str""#);
        assert_eq!(keep("42").unwrap(), "42");
        for bad in [r#"{"n""#, r#"{"n":"#, r#"{"n":[1"#, r#"{"n":1 "m":2}"#, r#"{n:1}"#, r#"{"n":1"#] {
            assert!(keep(bad).is_err(), "{bad}");
        }
        // Decoded from the kept fields, a node is the same as decoded whole.
        let node = r#"{"name":"a","address":"x","state":["IDLE"],"partitions":["p"],"energy":{"w":1}}"#;
        let whole: serde_json::Value = serde_json::from_str(node).unwrap();
        let mut out = Vec::new();
        only_fields(node.as_bytes(), &["name", "state", "partitions"], &mut out).unwrap();
        let kept: serde_json::Value = serde_json::from_slice(&out).unwrap();
        for k in ["name", "state", "partitions"] {
            assert_eq!(kept[k], whole[k]);
        }
    }

    /// A byte search: where the first match is.
    type Finder = fn(&[u8]) -> Option<usize>;

    /// Lengths that end inside, at and past the 16-byte and 8-byte chunks.
    const LENGTHS: std::ops::Range<usize> = 0..50;

    #[test]
    fn finds_structural_bytes_anywhere_in_a_word() {
        let finders: [(&str, Finder); 2] = [("sse2+swar", find_structural), ("swar", find_structural_swar)];
        for (finder, find) in finders {
            for len in LENGTHS {
                for at in 0..len {
                    for target in [b'"', b'{', b'}', b'[', b']'] {
                        let mut hay = vec![b' '; len];
                        hay[at] = target;
                        assert_eq!(find(&hay), Some(at), "{finder} {len} {at} {target}");
                        // The first of two.
                        if at + 1 < len {
                            hay[len - 1] = b'"';
                            assert_eq!(find(&hay), Some(at), "{finder} {len} {at} {target}");
                        }
                    }
                }
                assert_eq!(find(&vec![b'1'; len]), None, "{finder} {len}");
            }
            // Every other byte value, 0x00..=0xff, is passed over.
            let others: Vec<u8> = (0..=255u8).filter(|b| !b"\"{}[]".contains(b)).collect();
            assert_eq!(find(&others), None, "{finder}");
        }
    }

    #[test]
    fn finds_quotes_and_backslashes_anywhere_in_a_word() {
        let finders: [(&str, Finder); 2] =
            [("sse2+swar", find_quote_or_backslash), ("swar", find_quote_or_backslash_swar)];
        for (finder, find) in finders {
            for len in LENGTHS {
                for at in 0..len {
                    for target in [b'"', b'\\'] {
                        let mut hay = vec![b'x'; len];
                        hay[at] = target;
                        assert_eq!(find(&hay), Some(at), "{finder} {len} {at}");
                        if at + 1 < len {
                            hay[at + 1] = b'"';
                            hay[len - 1] = b'\\';
                            assert_eq!(find(&hay), Some(at), "{finder} {len} {at}");
                        }
                    }
                }
                assert_eq!(find(&vec![b'a'; len]), None, "{finder} {len}");
            }
            // Bytes around the targets' values (0x22, 0x5c) and high bytes are not matches.
            let near: Vec<u8> = [0x21u8, 0x23, 0x5b, 0x5d, 0xa2, 0xdc, 0xff, 0x00, 0x01, 0x80].repeat(5);
            assert_eq!(find(&near), None, "{finder}");
        }
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
