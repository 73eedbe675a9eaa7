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
//! everything else is skipped without being decoded. A reader that reads the same command again
//! (a reconcile pass, every pass) keeps a [`Recall`] of the elements: one whose bytes are those of
//! the element at its place last time is taken by its length and hash, not scanned, and its fields
//! are cut where they were.

use std::io::BufRead;

/// Reads the JSON object of `reader` and calls `each` for every element of the arrays under the
/// top-level `keys` (in document order). Returns which keys were found. Errors say what was wrong
/// and at which byte of the output. Given a `recall`, it remembers the elements of the first key's
/// array in it and finds the ones unchanged since the last read by their length and hash, without
/// scanning them (see [`Recall`]); if the read fails, `recall` is emptied.
pub(crate) fn for_each_element(
    reader: &mut dyn BufRead,
    keys: &[&str],
    mut recall: Option<&mut Recall>,
    each: impl FnMut(Element<'_>) -> Result<(), String>,
) -> Result<Vec<bool>, String> {
    let walked = walk(reader, keys, recall.as_deref_mut(), each);
    if let (Err(_), Some(recall)) = (&walked, recall) {
        recall.seen.clear();
        recall.kept.clear();
    }
    walked
}

/// One element of an array [`for_each_element`] reads.
pub(crate) struct Element<'a> {
    /// Which of the keys asked for its array is under.
    pub key: usize,
    /// Its position in the array.
    pub index: usize,
    pub bytes: &'a [u8],
    /// Its bytes are those the element at this position had in the last read.
    pub same: bool,
    /// The numbers kept with it for the next read ([`Recall::new`]'s `stride` of them): as left in
    /// the last read when `same`, zeros otherwise. Empty for the arrays of the other keys.
    pub kept: &'a mut [u16],
}

/// The elements of the first key's array as the last read of a document saw them: the length and a
/// 128-bit hash (xxh3, seeded at random per process) of each, by position, and `stride` numbers its
/// reader keeps with each. A command printed again with most of its elements unchanged, as `sinfo`
/// or `scontrol` in a steady cluster, then costs a hash of each unchanged element instead of a scan
/// of its strings and nesting: the next `len` bytes are taken as they come and hashed; if they are
/// the same, they end where the element ended last time (a scan of the same bytes ends at the same
/// place), and if not, they are put back and scanned. 20 bytes an element, and its reader's numbers.
pub(crate) struct Recall {
    seed: u64,
    stride: usize,
    seen: Vec<Seen>,
    kept: Vec<u16>,
}

impl std::fmt::Debug for Recall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recall").field("elements", &self.seen.len()).finish_non_exhaustive()
    }
}

/// An element as last read: 20 bytes (a `u128` would align it to 32).
#[derive(Clone, Copy, PartialEq)]
struct Seen {
    len: u32,
    hash: [u32; 4],
}

impl Recall {
    /// A recall of nothing yet, keeping `stride` numbers with each element.
    pub(crate) fn new(stride: usize) -> Recall {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64);
        Recall { seed, stride, seen: Vec::new(), kept: Vec::new() }
    }

    /// Remembers `bytes` as the element at `index` (`same`: as it was last time, not hashed again)
    /// and returns the numbers kept with it: as left last time when `same`, zeros otherwise.
    fn remember(&mut self, index: usize, same: Option<Seen>, bytes: &[u8]) -> &mut [u16] {
        let seen = same.unwrap_or_else(|| self.seen(bytes));
        if index < self.seen.len() {
            self.seen[index] = seen;
        } else {
            self.seen.push(seen);
            self.kept.resize(self.seen.len() * self.stride, 0);
        }
        let kept = &mut self.kept[index * self.stride..(index + 1) * self.stride];
        if same.is_none() {
            kept.fill(0);
        }
        kept
    }

    /// For a document held whole (a GCE list page): the element at `index` of the recalled array,
    /// whose first byte is `bytes[at]`. Returns where it ends, whether it is the element this
    /// position had last time (the next `len` bytes hashed, not scanned) and the numbers kept with
    /// it (as left last time when it is, zeros otherwise). An element that is not the same is
    /// scanned ([`value_end`]); `None` when it does not end in `bytes`.
    pub(crate) fn element_in(
        &mut self,
        index: usize,
        bytes: &[u8],
        at: usize,
    ) -> Option<(usize, bool, &mut [u16])> {
        let last = self.seen.get(index).copied();
        let same = last.filter(|seen| {
            bytes.get(at..at + seen.len as usize).is_some_and(|taken| self.seen(taken) == *seen)
        });
        let end = match same {
            Some(seen) => at + seen.len as usize,
            None => value_end(bytes, at)?,
        };
        Some((end, same.is_some(), self.remember(index, same, &bytes[at..end])))
    }

    /// How many elements the last read found.
    pub(crate) fn len(&self) -> usize {
        self.seen.len()
    }

    /// Keeps the first `n` elements (a read that found only `n`: the rest are gone).
    pub(crate) fn keep_first(&mut self, n: usize) {
        self.seen.truncate(n);
        self.kept.truncate(n * self.stride);
    }

    /// Forgets every element (a read that failed: the next is read as if for the first time).
    pub(crate) fn forget(&mut self) {
        self.keep_first(0);
    }

    /// `bytes` as it would be remembered.
    fn seen(&self, bytes: &[u8]) -> Seen {
        let hash = xxhash_rust::xxh3::xxh3_128_with_seed(bytes, self.seed);
        let hash = [0, 32, 64, 96].map(|shift| (hash >> shift) as u32);
        Seen { len: bytes.len() as u32, hash }
    }
}

fn walk(
    reader: &mut dyn BufRead,
    keys: &[&str],
    mut recall: Option<&mut Recall>,
    mut each: impl FnMut(Element<'_>) -> Result<(), String>,
) -> Result<Vec<bool>, String> {
    let mut r = Reader { inner: reader, offset: 0, back: Vec::new(), back_at: 0 };
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
                            let here = recall.as_deref_mut().filter(|_| k == 0);
                            let last = here.as_ref().and_then(|rc| rc.seen.get(index).copied());
                            let same = match (last, here.as_deref()) {
                                (Some(seen), Some(rc)) => r.take_if_same(&mut element, seen, rc)?,
                                _ => false,
                            };
                            if !same {
                                r.value(Some(&mut element), Some(start))?;
                            }
                            let kept = match here {
                                Some(rc) => rc.remember(index, last.filter(|_| same), &element),
                                None => &mut [],
                            };
                            each(Element { key: k, index, bytes: &element, same, kept })?;
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
                if let Some(recall) = recall.as_deref_mut().filter(|_| k == 0) {
                    // Fewer elements than last time: the rest are gone.
                    recall.seen.truncate(index);
                    recall.kept.truncate(index * recall.stride);
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

/// The numbers [`only_fields`] keeps for `fields`.
pub(crate) fn field_note_len(fields: &[&str]) -> usize {
    1 + 2 * fields.len()
}

/// Writes into `out` the JSON object `element` with only its top-level `fields` (in the element's
/// order), so that a node of ~1.4 KB is decoded from the hundred bytes a pass reads: every other
/// value is skipped as [`for_each_element`] skips, never decoded, and once every field is found the
/// rest of the element is not looked at (Slurm prints the fields a pass reads in the first two
/// thirds of a node).
/// Keys are compared as printed (Slurm's keys hold no escapes). An element that is not an object is
/// copied whole, for the decoder to say what it is instead.
///
/// Notes in `note` (empty, or [`field_note_len`] long) where each field's value is in `element`, so
/// that [`only_fields_again`] cuts the same bytes without looking for them: `note[0]` is 1 when the
/// note is whole, then the start and end of each field's value (0, 0 for a field the element
/// lacks). An element of 64 KiB or more, or with a field given twice, is not noted.
pub(crate) fn only_fields(
    element: &[u8],
    fields: &[&str],
    out: &mut Vec<u8>,
    note: &mut [u16],
) -> Result<(), String> {
    note.fill(0);
    let noted = only_fields_inner(element, fields, out, note)?;
    if let Some(whole) = note.first_mut() {
        *whole = u16::from(noted && element.len() <= usize::from(u16::MAX));
    }
    Ok(())
}

/// What [`only_fields`] writes for an element whose bytes are those `note` was taken from (by
/// [`only_fields`]); false, with nothing written, when the note is not whole.
pub(crate) fn only_fields_again(element: &[u8], fields: &[&str], out: &mut Vec<u8>, note: &[u16]) -> bool {
    if note.first() != Some(&1) || note.len() != field_note_len(fields) {
        return false;
    }
    out.clear();
    out.push(b'{');
    for (f, name) in fields.iter().enumerate() {
        let (start, end) = (usize::from(note[1 + 2 * f]), usize::from(note[2 + 2 * f]));
        if start == 0 {
            continue;
        }
        let Some(value) = element.get(start..end) else {
            // Not the bytes the note was taken from.
            out.clear();
            return false;
        };
        if out.len() > 1 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(value);
    }
    out.push(b'}');
    true
}

/// [`only_fields`]' cut; whether the fields' places were noted in `note` (an object, each field
/// found at most once).
fn only_fields_inner(
    element: &[u8],
    fields: &[&str],
    out: &mut Vec<u8>,
    note: &mut [u16],
) -> Result<bool, String> {
    out.clear();
    let ws = |b: &u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t');
    let skip_ws = |at: usize| at + element[at..].iter().take_while(|b| ws(b)).count();
    let mut at = skip_ws(0);
    if element.get(at) != Some(&b'{') {
        out.extend_from_slice(element);
        return Ok(false);
    }
    let cut = |why: &str| format!("a node's object is cut short ({why})");
    // Which of `fields` were kept, one bit each.
    assert!(fields.len() < 64, "at most 63 fields");
    let all = (1u64 << fields.len()) - 1;
    let mut found = 0u64;
    let mut repeated = false;
    out.push(b'{');
    at = skip_ws(at + 1);
    if element.get(at) == Some(&b'}') {
        out.push(b'}');
        return Ok(true);
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
            if found & (1 << f) != 0 {
                // Repeated: kept for the decoder to refuse; no note says which to take.
                repeated = true;
            } else if let (Some(s), Some(e)) = (u16::try_from(at).ok(), u16::try_from(end).ok()) {
                if note.len() > 2 + 2 * f {
                    note[1 + 2 * f] = s;
                    note[2 + 2 * f] = e;
                }
            }
            found |= 1 << f;
            if found == all {
                // The rest is not read: the element's nesting and strings were checked when it was
                // cut out of the stream, and nothing after this is kept.
                out.push(b'}');
                return Ok(!repeated);
            }
        }
        at = skip_ws(end);
        match element.get(at) {
            Some(b',') => at = skip_ws(at + 1),
            Some(b'}') => {
                out.push(b'}');
                return Ok(!repeated);
            }
            _ => return Err(cut("`,` or `}`")),
        }
    }
}

/// The end (exclusive) of the JSON value whose first byte is `bytes[at]`, in a document held whole:
/// strings and nesting tracked as [`for_each_element`] tracks them, a bare word ending at a
/// delimiter or the end of `bytes`. `None` when the value does not end in `bytes`.
pub(crate) fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut scan = Scan::new(*bytes.get(at)?);
    match scan.feed(&bytes[at + 1..]) {
        (used, true) => Some(at + 1 + used),
        (used, false) if scan.word => Some(at + 1 + used),
        _ => None,
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
    /// Bytes taken from `inner` and put back ([`Reader::take_if_same`]), read before `inner`'s from
    /// `back_at` on.
    back: Vec<u8>,
    back_at: usize,
}

impl Reader<'_> {
    fn unexpected(&self, byte: u8, expected: &str) -> String {
        format!("expected {expected}, found {} at byte {}", shown(byte), self.offset.saturating_sub(1))
    }

    fn eof(&self) -> String {
        format!("the output ends too early (after {} bytes)", self.offset)
    }

    fn buf(&mut self) -> Result<&[u8], String> {
        if self.back_at < self.back.len() {
            return Ok(&self.back[self.back_at..]);
        }
        self.inner.fill_buf().map_err(|e| format!("reading the output: {e}"))
    }

    /// Marks `n` bytes of [`Reader::buf`] read.
    fn consume(&mut self, n: usize) {
        if self.back_at < self.back.len() {
            self.back_at += n;
            if self.back_at == self.back.len() {
                self.back.clear();
                self.back_at = 0;
            }
        } else {
            self.inner.consume(n);
        }
        self.offset += n as u64;
    }

    /// Whether the element whose first byte is `element`'s is the one `seen` describes: its next
    /// `seen.len - 1` bytes are appended to `element` and hashed. If they are not the same, they are
    /// put back to be read again, and `element` is left with its first byte.
    fn take_if_same(&mut self, element: &mut Vec<u8>, seen: Seen, recall: &Recall) -> Result<bool, String> {
        let len = seen.len as usize;
        while element.len() < len {
            let buf = self.buf()?;
            if buf.is_empty() {
                break;
            }
            let take = (len - element.len()).min(buf.len());
            element.extend_from_slice(&buf[..take]);
            self.consume(take);
        }
        if element.len() == len && recall.seen(element) == seen {
            return Ok(true);
        }
        let taken = &element[1..];
        let mut back = Vec::with_capacity(taken.len() + self.back.len() - self.back_at);
        back.extend_from_slice(taken);
        back.extend_from_slice(&self.back[self.back_at..]);
        self.offset -= taken.len() as u64;
        self.back = back;
        self.back_at = 0;
        element.truncate(1);
        Ok(false)
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
                    self.consume(at + 1);
                    return Ok(Some(byte));
                }
                None => {
                    let n = buf.len();
                    self.consume(n);
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
            self.consume(used);
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
        let found = for_each_element(&mut reader, keys, None, |e| {
            got.push((e.key, e.index, String::from_utf8(e.bytes.to_vec()).unwrap()));
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
            only_fields(e.as_bytes(), &["name", "state", "n"], &mut out, &mut [])
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
        only_fields(node.as_bytes(), &["name", "state", "partitions"], &mut out, &mut []).unwrap();
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
        let err = for_each_element(&mut reader, &["nodes"], None, |e| {
            if e.index == 1 {
                Err("bad".into())
            } else {
                Ok(())
            }
        });
        assert_eq!(err.unwrap_err(), "bad");
    }

    /// Every element of `nodes` as (text, same), read with `recall` through a buffer of `capacity`.
    fn recalled(doc: &str, recall: &mut Recall, capacity: usize) -> Result<Vec<(String, bool)>, String> {
        let mut got = Vec::new();
        let mut reader = std::io::BufReader::with_capacity(capacity, doc.as_bytes());
        for_each_element(&mut reader, &["nodes", "sinfo"], Some(recall), |e| {
            assert_eq!(e.kept.len(), if e.key == 0 { 3 } else { 0 });
            if e.key == 0 {
                got.push((String::from_utf8(e.bytes.to_vec()).unwrap(), e.same));
            }
            Ok(())
        })?;
        Ok(got)
    }

    #[test]
    fn a_recalled_read_finds_unchanged_elements_and_reads_what_a_fresh_read_reads() {
        let doc = |nodes: &[&str]| {
            format!(r#"{{"meta": {{"v": 1}}, "nodes": [{}], "sinfo": [{{"g": 1}}]}}"#, nodes.join(", "))
        };
        let (a, c) = (r#"{"name": "a", "s": "x\"]"}"#, r#"{"name": "c"}"#);
        let b = r#"{"name": "b", "n": [1, {"k": "}"}]}"#;
        let b2 = r#"{"name": "b", "n": [1, {"k": "{"}]}"#;
        let long = r#"{"name": "a-longer-than-the-rest-of-the-document"}"#;
        // The nodes printed at each step, and which are the same as the step before's at their place.
        let steps: &[(&[&str], &[bool])] = &[
            (&[a, b, c], &[false, false, false]),
            (&[a, b, c], &[true, true, true]),
            (&[a, b2, c], &[true, false, true]), // as long as before, not the same
            (&[a, b, c], &[true, false, true]),
            (&[a, c, b], &[true, false, false]), // shorter: the bytes taken past it are put back
            (&[a, c, b, c, "42"], &[true, true, true, false, false]),
            (&[a], &[true]),
            (&[a, long], &[true, false]),
            (&[a, "1"], &[true, false]), // the bytes taken reach the end of the output
            (&[], &[]),
            (&[a], &[false]),
        ];
        for capacity in [1, 3, 7, 64, 8192] {
            let mut recall = Recall::new(3);
            for (i, (nodes, same)) in steps.iter().enumerate() {
                let text = doc(nodes);
                let fresh: Vec<String> = elements(&text, &["nodes", "sinfo"], 8192)
                    .unwrap()
                    .0
                    .into_iter()
                    .filter(|e| e.0 == 0)
                    .map(|e| e.2)
                    .collect();
                let got = recalled(&text, &mut recall, capacity).unwrap();
                let texts: Vec<String> = got.iter().map(|g| g.0.clone()).collect();
                assert_eq!(texts, fresh, "step {i}, capacity {capacity}");
                let sames: Vec<bool> = got.iter().map(|g| g.1).collect();
                assert_eq!(sames, *same, "step {i}, capacity {capacity}");
            }
        }
    }

    #[test]
    fn a_failed_read_forgets_and_errors_still_say_where() {
        let mut recall = Recall::new(3);
        let doc = r#"{"nodes": [{"name": "a"}, {"name": "b"}]}"#;
        recalled(doc, &mut recall, 64).unwrap();
        // Cut short inside a recalled element: the same error as without a recall.
        let short = &doc[..30];
        let fresh = elements(short, &["nodes"], 64).unwrap_err();
        assert_eq!(recalled(short, &mut recall, 64).unwrap_err(), fresh);
        let sames: Vec<bool> = recalled(doc, &mut recall, 64).unwrap().into_iter().map(|g| g.1).collect();
        assert_eq!(sames, [false, false], "nothing is recalled after a failed read");
        // An error past a recalled element names the byte a fresh read names.
        let bad = r#"{"nodes": [{"name": "a"}, {"name": "b"} x]}"#;
        recalled(doc, &mut recall, 64).unwrap();
        assert_eq!(recalled(bad, &mut recall, 7).unwrap_err(), elements(bad, &["nodes"], 7).unwrap_err());
    }

    #[test]
    fn noted_fields_are_cut_again_as_they_were_cut() {
        let fields = ["name", "state", "n"];
        let parse = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap();
        for element in [
            r#"{ "x": {"name": "no"}, "name" : "a\"b}", "skip": "s\\", "state": ["IDLE", "CLOUD"], "n": 7 }"#,
            r#"{"other": null}"#,
            " { } ",
            r#"{"n":1}"#,
            r#"{"n":1,"state":2,"name":3,"x" 4}"#,
        ] {
            let (mut first, mut again) = (Vec::new(), Vec::new());
            let mut note = vec![7u16; field_note_len(&fields)];
            only_fields(element.as_bytes(), &fields, &mut first, &mut note).unwrap();
            assert_eq!(note[0], 1, "{element}");
            assert!(only_fields_again(element.as_bytes(), &fields, &mut again, &note), "{element}");
            assert_eq!(parse(&again), parse(&first), "{element}");
        }
        // Not noted: a field given twice (which to take?), not an object, an element too long for
        // the note's numbers.
        let long = format!(r#"{{"name": "{}", "n": 1}}"#, "x".repeat(70_000));
        for element in [r#"{"n":1,"n":2,"state":3,"name":4}"#, "42", &long] {
            let mut out = Vec::new();
            let mut note = vec![7u16; field_note_len(&fields)];
            only_fields(element.as_bytes(), &fields, &mut out, &mut note).unwrap();
            assert_eq!(note[0], 0, "{}", &element[..20.min(element.len())]);
            assert!(!only_fields_again(element.as_bytes(), &fields, &mut out, &note));
        }
        // A note of other fields is not used.
        assert!(!only_fields_again(b"{}", &fields, &mut Vec::new(), &[1, 0, 0]));
    }
}
