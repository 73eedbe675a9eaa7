//! `instances.aggregatedList` pages read one VM at a time, and the recall of a list's VMs.
//!
//! A pass lists every VM of the cluster: at 10,000 VMs, 20 pages of ~600 KB. Each page is walked
//! ([`LeanPage::read`]): its scopes and `instances` arrays are found by their strings and nesting
//! alone (`json_stream`'s scan), and each VM is cut out and decoded lean ([`LeanVm`]), borrowed
//! from the page. In a steady cluster a VM's bytes are the same from one pass to the next, so the
//! list keeps a [`VmRecall`]: by position across the list's pages, each VM's length and hash and
//! where the strings a pass reads were in it. A VM whose next `len` bytes hash as the VM at its
//! position did last time is not scanned and not decoded: its strings are cut where they were.
//! Anything else (a VM changed, added or gone, which moves every VM after it) is scanned and
//! decoded as on a first read, and noted for the next.

use super::lean_vms::{LeanVm, Parts, PARTS};
use super::types::{ListWarning, Unreachable};
use crate::json_stream::{value_end, Recall};
use std::borrow::Cow;

/// One page of `instances.aggregatedList` without its VMs, which [`LeanPage::read`] hands out one
/// at a time as it decodes them (no list of 500 VMs is built): what is left is where the next
/// page starts and what the page says it left out.
#[derive(Debug, Default)]
pub(crate) struct LeanPage {
    pub next_page_token: String,
    /// Each scope of `items` with its `warning`, in the page's order.
    scopes: Vec<(String, Option<ListWarning>)>,
    unreachables: Vec<String>,
    warning: Option<ListWarning>,
}

/// The VMs of one list as its last read found them (see the module's docs): 20 bytes of length and
/// hash and [`NOTE`] numbers each, ~78 bytes a VM (the VM's `id`, read for the usage spans, added
/// 4: 40 KB at 10,000 VMs). Errors of a read leave it to be forgotten
/// ([`VmRecall::forget`]).
#[derive(Debug)]
pub struct VmRecall {
    recall: Recall,
    /// The position of the next VM of the read under way.
    next: usize,
    /// How many VMs the read under way took as they were.
    taken: usize,
}

impl Default for VmRecall {
    fn default() -> Self {
        VmRecall { recall: Recall::new(NOTE), next: 0, taken: 0 }
    }
}

impl VmRecall {
    /// A new read of the list begins at its first VM.
    pub(crate) fn begin(&mut self) {
        self.next = 0;
        self.taken = 0;
    }

    /// How many VMs the last complete read found.
    pub fn len(&self) -> usize {
        self.recall.len()
    }

    /// Whether the last complete read found none (or there was none).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many VMs the last read took as they were, not decoded.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// The read found every VM it will: those past them last time are gone.
    pub(crate) fn end(&mut self) {
        self.recall.keep_first(self.next);
    }

    /// The read failed: the next is read as if for the first time.
    pub(crate) fn forget(&mut self) {
        self.recall.forget();
        self.next = 0;
        self.taken = 0;
    }
}

/// The numbers noted with a VM: 1 when the note is whole, then each of its [`Parts`] as its start
/// in the VM's bytes and its length plus one (0 when the VM has no such part).
const NOTE: usize = 1 + 2 * PARTS;

impl LeanPage {
    /// Decodes one page, calling `each(zone, vm)` for every VM with its zone's name (from the VM's
    /// `zone`, else from its scope's key `zones/{zone}`) as soon as the VM is decoded. With a
    /// `recall`, the page's VMs are the next of the list it recalls.
    pub(crate) fn read<'a>(
        bytes: &'a [u8],
        mut recall: Option<&mut VmRecall>,
        mut each: impl FnMut(&str, LeanVm<'a>),
    ) -> Result<Self, String> {
        let mut page = LeanPage::default();
        let mut w = Walk { bytes, at: 0 };
        w.object("a JSON object", |w, key| {
            match key.as_ref() {
                "items" => w.object("a map of scopes", |w, scope| {
                    let scope = scope.into_owned();
                    let zone = scope.strip_prefix("zones/").unwrap_or_default();
                    let mut warning = None;
                    w.object("a scoped list", |w, key| {
                        match key.as_ref() {
                            "instances" => w.array("a list of instances", |w| {
                                let vm = w.vm(recall.as_deref_mut())?;
                                let escaped;
                                let zone = match &vm.zone {
                                    Cow::Borrowed("") => zone,
                                    Cow::Borrowed(url) => super::last_segment(url),
                                    // A zone with escapes in it (never seen): copied, as `vm` moves to `each`.
                                    Cow::Owned(url) if url.is_empty() => zone,
                                    Cow::Owned(url) => {
                                        escaped = super::last_segment(url).to_string();
                                        &escaped
                                    }
                                };
                                each(zone, vm);
                                Ok(())
                            })?,
                            "warning" => warning = w.decode("a scope's warning")?,
                            _ => w.skip()?,
                        }
                        Ok(())
                    })?;
                    page.scopes.push((scope, warning));
                    Ok(())
                })?,
                "nextPageToken" => page.next_page_token = w.decode("nextPageToken")?,
                "unreachables" => page.unreachables = w.decode("unreachables")?,
                "warning" => page.warning = w.decode("the page's warning")?,
                _ => w.skip()?,
            }
            Ok(())
        })?;
        match w.peek() {
            None => Ok(page),
            Some(other) => Err(w.unexpected(other, "the end of the page")),
        }
    }

    /// Adds what the page left out to `unreachable`.
    pub(crate) fn unreachable_into(&self, unreachable: &mut Unreachable) {
        unreachable.add_parts(
            self.scopes.iter().map(|(scope, warning)| (scope.as_str(), warning.as_ref())),
            &self.unreachables,
            self.warning.as_ref(),
        );
    }
}

/// Notes in `note` where `vm`'s parts are in `element`, the bytes it was decoded from. A part
/// copied out of them (it had escapes), or an element of 64 KiB or more, leaves the note not whole.
fn note_parts(vm: &LeanVm<'_>, element: &[u8], note: &mut [u16]) {
    note.fill(0);
    if element.len() > usize::from(u16::MAX) {
        return;
    }
    let base = element.as_ptr() as usize;
    for (k, part) in vm.parts().iter().enumerate() {
        let Some(part) = part else { continue };
        let start = if part.is_empty() {
            0
        } else {
            let start = (part.as_ptr() as usize).wrapping_sub(base);
            if start.checked_add(part.len()).is_none_or(|end| end > element.len()) {
                return;
            }
            start
        };
        // Both fit: the element is shorter than 64 KiB.
        note[1 + 2 * k] = start as u16;
        note[2 + 2 * k] = (part.len() + 1) as u16;
    }
    note[0] = 1;
}

/// The VM whose parts `note` says where they are in `element` (the bytes [`note_parts`] noted, as
/// the hash says); `None` when the note is not whole.
fn noted_vm<'a>(element: &'a [u8], note: &[u16]) -> Option<LeanVm<'a>> {
    if note.first() != Some(&1) {
        return None;
    }
    let mut parts: Parts<'a> = [None; PARTS];
    for (k, part) in parts.iter_mut().enumerate() {
        let (start, len) = (usize::from(note[1 + 2 * k]), usize::from(note[2 + 2 * k]));
        if len > 0 {
            // Each part checked, not the element: a VM's metadata can hold kilobytes of script.
            *part = Some(std::str::from_utf8(element.get(start..start + len - 1)?).ok()?);
        }
    }
    Some(LeanVm::from_parts(parts))
}

/// A walk through a page held whole: only strings and nesting are looked at, except where a value
/// is decoded.
struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Walk<'a> {
    /// The next byte that is not whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
        self.bytes.get(self.at).copied()
    }

    fn unexpected(&self, byte: u8, expected: &str) -> String {
        let shown = if byte.is_ascii_graphic() {
            format!("`{}`", byte as char)
        } else {
            format!("byte 0x{byte:02x}")
        };
        format!("expected {expected}, found {shown} at byte {}", self.at)
    }

    fn eof(&self) -> String {
        format!("the page ends too early (after {} bytes)", self.bytes.len())
    }

    /// Consumes `byte`, the next that is not whitespace.
    fn expect(&mut self, byte: u8, expected: &str) -> Result<(), String> {
        match self.peek() {
            Some(b) if b == byte => {
                self.at += 1;
                Ok(())
            }
            Some(other) => Err(self.unexpected(other, expected)),
            None => Err(self.eof()),
        }
    }

    /// The next value's bytes, consumed.
    fn value(&mut self) -> Result<&'a [u8], String> {
        let start = match self.peek() {
            Some(_) => self.at,
            None => return Err(self.eof()),
        };
        let end = value_end(self.bytes, start).ok_or_else(|| self.eof())?;
        self.at = end;
        Ok(&self.bytes[start..end])
    }

    fn skip(&mut self) -> Result<(), String> {
        self.value().map(|_| ())
    }

    /// The next value, decoded.
    fn decode<T: serde::Deserialize<'a>>(&mut self, what: &str) -> Result<T, String> {
        let at = self.peek().map(|_| self.at);
        let value = self.value()?;
        serde_json::from_slice(value).map_err(|e| format!("{what} at byte {}: {e}", at.unwrap_or_default()))
    }

    /// Each key of the object that comes next, `each` consuming its value.
    fn object(
        &mut self,
        expected: &str,
        mut each: impl FnMut(&mut Self, Cow<'a, str>) -> Result<(), String>,
    ) -> Result<(), String> {
        self.expect(b'{', expected)?;
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            let key = match self.peek() {
                Some(b'"') => {
                    let raw = self.value()?;
                    let inner = &raw[1..raw.len() - 1];
                    match (inner.contains(&b'\\'), std::str::from_utf8(inner)) {
                        (false, Ok(key)) => Cow::Borrowed(key),
                        _ => Cow::Owned(
                            serde_json::from_slice::<String>(raw)
                                .map_err(|e| format!("a key before byte {}: {e}", self.at))?,
                        ),
                    }
                }
                Some(other) => return Err(self.unexpected(other, "a key")),
                None => return Err(self.eof()),
            };
            self.expect(b':', "`:`")?;
            each(self, key)?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                Some(other) => return Err(self.unexpected(other, "`,` or `}`")),
                None => return Err(self.eof()),
            }
        }
    }

    /// Each element of the array that comes next, `each` consuming it.
    fn array(
        &mut self,
        expected: &str,
        mut each: impl FnMut(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        self.expect(b'[', expected)?;
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            each(self)?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                Some(other) => return Err(self.unexpected(other, "`,` or `]`")),
                None => return Err(self.eof()),
            }
        }
    }

    /// The VM that comes next, consumed: taken by its length and hash and cut where its note says
    /// when `recall` has it as it is, else scanned, decoded and noted.
    fn vm(&mut self, recall: Option<&mut VmRecall>) -> Result<LeanVm<'a>, String> {
        let at = match self.peek() {
            Some(_) => self.at,
            None => return Err(self.eof()),
        };
        let bytes = self.bytes;
        let decode = |element: &'a [u8]| {
            serde_json::from_slice::<LeanVm<'a>>(element).map_err(|e| format!("the VM at byte {at}: {e}"))
        };
        let Some(recall) = recall else {
            let element = self.value()?;
            return decode(element);
        };
        let index = recall.next;
        let (end, same, note) = recall.recall.element_in(index, bytes, at).ok_or_else(|| self.eof())?;
        let element = &bytes[at..end];
        let vm = match same.then(|| noted_vm(element, note)).flatten() {
            Some(vm) => {
                recall.taken += 1;
                vm
            }
            None => {
                let vm = decode(element)?;
                note_parts(&vm, element, note);
                vm
            }
        };
        recall.next += 1;
        self.at = end;
        Ok(vm)
    }
}

#[cfg(test)]
#[path = "lean_pages_tests.rs"]
mod tests;
