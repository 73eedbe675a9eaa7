//! Slurm hostlist expressions: expand and compress them exactly as Slurm 22.05 does.
//!
//! slurmctld hands our hooks node lists such as `hpc-a3u-[0-3,7],hpc-g2-12`, and we hand
//! node lists back to `scontrol`. Both directions must agree with Slurm to the character:
//! a node we expand differently is a node we provision (or fail to release) by mistake.
//! The oracle is Slurm itself, `scontrol show hostnames EXPR` and `scontrol show hostlist
//! LIST`; `tests/hostlist_oracle.rs` compares this module with it on generated expressions.
//!
//! # The grammar, as Slurm parses it
//!
//! An expression is a list of *items* separated by `,`, space or tab; empty items are
//! dropped (`a,,b`, `,a,`, `"a  b"`). Separators inside brackets belong to the bracket. An
//! item is literal text with zero or more bracket groups, e.g. `rack[1-2]-node[01-16]`,
//! where each group is a comma-separated list of `N` or `LO-HI` decimal ranges:
//!
//! * Zero padding is per range and comes from the text of `LO`: `[01-03,7]` gives `01 02 03
//!   7`; `[1-010]` gives `1 … 10` (width 1); `[001-10]` gives `001 … 010`.
//! * Several groups multiply. Slurm nests the loops in an unusual order, which we copy:
//!   the *last* group varies fastest, then the first, second, … up to the second-to-last,
//!   which varies slowest. So `n[1-2]-[5-6]` gives `n1-5 n1-6 n2-5 n2-6`, but
//!   `a[1-2]b[1-2]c[1-2]` gives `a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 …`.
//! * Text may come before and between groups but not after the last one: `n[1-2]x` is
//!   rejected by Slurm (and by us) while `n[1-2]x[3]` is fine.
//! * Order and duplicates are kept: `n[1-3],n[2-4]` gives `n1 n2 n3 n2 n3 n4`.
//! * One range may hold at most 65,536 hosts and one group at most 65,536 ranges (Slurm's
//!   `MAX_RANGE` and `MAX_RANGES`); `a[3-1]`, `n[]`, `n[a-b]`, `n[-1]`, `n[1,,2]` are errors.
//!
//! # Where we are stricter than Slurm
//!
//! Slurm accepts a few inputs and gives answers that no caller can want. We reject them
//! (with an error naming the problem) instead of guessing; each one is a malformed hook
//! argument, never a real node list:
//!
//! * an unclosed `[` (Slurm turns `n[1-3` into the single name `n]`);
//! * a `]` with no `[` (Slurm keeps `n]` or `n1-2]` as a literal node name);
//! * a range with a missing end, a sign, blanks or other junk (Slurm reads `n[1-]` as `n1`,
//!   and `n[+1-3]` or `n[ 1-3]` as `n01 n02 n03` because the sign or blank counts as padding);
//! * a `[` inside an open bracket (Slurm sometimes rejects it, and sometimes keeps the first
//!   `[` as text: `n[1-3[1-3` gives the name `n[1-3]`, `a[1b[1-2]` gives `a[1b1 a[1b2`);
//! * numbers above 18,446,744,073,709,551,614 (Slurm saturates them to `u64::MAX` and
//!   prints a different name, or silently drops a range that ends there);
//! * control characters such as a newline inside a name (Slurm keeps them in the name);
//! * expressions that expand to more than [`MAX_NAMES`] names (Slurm has no total limit
//!   and will try to build millions of names from one short argument).
//!
//! # Compression
//!
//! [`compress`] is `scontrol show hostlist`: it does **not** sort and does **not** remove
//! duplicates. It walks the names in order, splitting each into a prefix and a numeric
//! suffix, and extends the previous range only when the new name is the next number with
//! the same prefix and a compatible zero padding. Consecutive ranges with the same prefix
//! then share one bracket: `n1,n2,n3,n05,n06,m1` → `n[1-3,05-06],m1`, `n3,n1,n2` →
//! `n[3,1-2]`, `n1,n1` → `n[1,1]`, `n1,m1,n2` → `n1,m1,n2`, `n9,n10` → `n[9-10]`.

use std::fmt;

/// The most names one expression may expand to. A hook argument is at most a few
/// thousand nodes; the cap is far above any real cluster and far below what would exhaust
/// memory (Slurm itself has no such limit).
pub const MAX_NAMES: usize = 1_000_000;

/// Slurm's `MAX_RANGE`: a single `LO-HI` range may hold at most this many hosts.
pub const MAX_RANGE_HOSTS: u64 = 64 * 1024;

/// Slurm's `MAX_RANGES`: a single bracket group may hold at most this many ranges.
pub const MAX_RANGES_PER_GROUP: usize = 64 * 1024;

/// The largest number a range or numeric suffix may use. Slurm parses numbers with
/// `strtoul`, which saturates at `u64::MAX`, and treats a range ending at `u64::MAX` as
/// empty; anything at or above it cannot mean what was written.
pub const MAX_NUMBER: u64 = u64::MAX - 1;

/// Errors are longer than a terminal line would hold only for absurd inputs; the offending
/// item is quoted up to this many characters.
const EXCERPT_CHARS: usize = 120;

/// Why a hostlist expression was rejected. Every variant quotes the item it is about, so
/// the message alone tells an admin what to fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum HostlistError {
    /// A `[` that is never closed. Slurm keeps going and invents a name ending in `]`.
    #[error("unclosed '[' in '{item}'")]
    UnclosedBracket { item: String },
    /// A `]` with no `[` before it. Slurm keeps it as part of a node name.
    #[error("']' without a matching '[' in '{item}'")]
    UnmatchedBracket { item: String },
    /// A `[` inside brackets; Slurm rejects some of these and misreads the rest.
    #[error("nested '[' in '{item}': a bracket holds only numbers and ranges")]
    NestedBracket { item: String },
    /// `[]`; Slurm rejects it as an empty range.
    #[error("empty brackets '[]' in '{item}'")]
    EmptyBrackets { item: String },
    /// Text after the last `]` of an item, e.g. `n[1-2]x`; Slurm rejects it as well.
    #[error("text after the last ']' in '{item}': text may only come before or between brackets")]
    TextAfterBracket { item: String },
    /// One element of a bracket group is not a usable `N` or `LO-HI` range.
    #[error("invalid range '{range}' in '{item}': {problem}")]
    InvalidRange { range: String, item: String, problem: RangeProblem },
    /// A bracket group with more than [`MAX_RANGES_PER_GROUP`] ranges (Slurm's limit).
    #[error("too many ranges in one bracket of '{item}': at most {MAX_RANGES_PER_GROUP}")]
    TooManyRanges { item: String },
    /// A number above [`MAX_NUMBER`], in a range or as a node name's numeric suffix.
    #[error("number '{number}' in '{item}' is too large: at most {MAX_NUMBER}")]
    NumberTooLarge { number: String, item: String },
    /// A control character (newline, NUL, ...) inside a name.
    #[error("invalid character {ch:?} in '{item}'")]
    InvalidCharacter { ch: char, item: String },
    /// The expression would expand to more than `limit` names.
    #[error("'{expr}' expands to more than {limit} names")]
    TooManyNames { limit: usize, expr: String },
}

/// What is wrong with one range inside brackets.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RangeProblem {
    /// Nothing between two commas or a comma and a bracket, e.g. `n[1,,2]`.
    Empty,
    /// Not `N` or `LO-HI` with decimal digits only, e.g. `a-b`, `1-`, `-1`, `+1`, ` 1`.
    NotNumeric,
    /// `LO` is greater than `HI`, e.g. `3-1`.
    Descending,
    /// More than [`MAX_RANGE_HOSTS`] hosts in one range.
    TooManyHosts,
}

impl fmt::Display for RangeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeProblem::Empty => f.write_str("empty range"),
            RangeProblem::NotNumeric => f.write_str("expected N or LO-HI with digits only"),
            RangeProblem::Descending => f.write_str("the start is greater than the end"),
            RangeProblem::TooManyHosts => {
                write!(f, "more than {MAX_RANGE_HOSTS} hosts in one range")
            }
        }
    }
}

/// Expands a hostlist expression into node names, in the order and with the duplicates
/// that `scontrol show hostnames` prints. The whole expression is validated and counted
/// before any name is built, so a malformed or absurd argument costs no memory.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let items = parse(expr)?;
    let mut total: usize = 0;
    for item in &items {
        total = total.saturating_add(item.count());
        if total > MAX_NAMES {
            return Err(HostlistError::TooManyNames { limit: MAX_NAMES, expr: excerpt(expr) });
        }
    }
    let mut names = Vec::with_capacity(total);
    for item in &items {
        item.expand_into(&mut names);
    }
    // Digits before a bracket join its numbers (`n18446744073709551615[0-3]`): a name built so
    // must still be one a plain list could name, or compress() could not give it back. Only a
    // run of 20+ trailing digits can be above MAX_NUMBER, so this is one byte scan per name.
    for name in names.iter().filter(|n| n.bytes().rev().take_while(u8::is_ascii_digit).count() >= 20) {
        check_suffix(name)?;
    }
    Ok(names)
}

/// Compresses node names into the expression `scontrol show hostlist` prints for them:
/// input order kept, duplicates kept, runs of consecutive numbers with one prefix and
/// compatible zero padding joined, and neighbouring runs with one prefix bracketed
/// together. Linear in the number of names.
///
/// Names are taken literally (they are expected to be node names, e.g. from [`expand`]).
/// A numeric suffix above [`MAX_NUMBER`] is treated as part of the prefix; Slurm would
/// print a different number, which would no longer name the same node.
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    let mut runs: Vec<Run<'_>> = Vec::new();
    for name in names {
        let next = Run::of(name.as_ref());
        if let Some(tail) = runs.last_mut() {
            if tail.try_extend(&next) {
                continue;
            }
        }
        runs.push(next);
    }

    let mut out = String::new();
    let mut i = 0;
    while i < runs.len() {
        if i > 0 {
            out.push(',');
        }
        let first = &runs[i];
        if first.single {
            out.push_str(first.prefix);
            i += 1;
            continue;
        }
        // Slurm's `_get_bracketed_list`: the bracket is needed when the first run has more
        // than one host or the next run shares its prefix.
        let shares = |j: usize| runs.get(j).is_some_and(|r| first.same_bracket(r));
        let bracket = first.hi > first.lo || shares(i + 1);
        out.push_str(first.prefix);
        if bracket {
            out.push('[');
        }
        let mut j = i;
        loop {
            if j > i {
                out.push(',');
            }
            let run = &runs[j];
            push_padded(&mut out, run.lo, run.width);
            if run.hi > run.lo {
                out.push('-');
                push_padded(&mut out, run.hi, run.width);
            }
            j += 1;
            if !shares(j) {
                break;
            }
        }
        if bracket {
            out.push(']');
        }
        i = j;
    }
    out
}

/// One item of an expression: `lits[0] [groups[0]] lits[1] … [groups[k-1]]`. The text after
/// the last group is always empty (Slurm forbids it), so `lits.len() == groups.len()`,
/// except for a plain name, which has one literal and no group.
struct Item<'a> {
    lits: Vec<&'a str>,
    groups: Vec<Vec<Range>>,
}

/// One `LO-HI` range (or `N`, with `lo == hi`) and the zero-padded width of its numbers.
#[derive(Clone, Copy, Debug)]
struct Range {
    lo: u64,
    hi: u64,
    width: usize,
}

impl Range {
    fn count(&self) -> u64 {
        self.hi - self.lo + 1
    }
}

impl Item<'_> {
    fn group_count(group: &[Range]) -> usize {
        group.iter().fold(0usize, |n, r| n.saturating_add(r.count() as usize))
    }

    /// How many names the item expands to, saturating (the caller only compares it with
    /// [`MAX_NAMES`]).
    fn count(&self) -> usize {
        self.groups.iter().fold(1usize, |n, g| n.saturating_mul(Self::group_count(g)))
    }

    fn expand_into(&self, out: &mut Vec<String>) {
        let k = self.groups.len();
        if k == 0 {
            out.push(self.lits[0].to_owned());
            return;
        }
        // Slurm's `_push_range_list` recurses from the second-to-last group down to the
        // first, and pushes the last group's ranges innermost.
        let order: Vec<usize> = (0..k - 1).rev().collect();
        let mut chosen = vec![(0u64, 0usize); k];
        self.walk(&order, &mut chosen, out);
    }

    fn walk(&self, order: &[usize], chosen: &mut [(u64, usize)], out: &mut Vec<String>) {
        if let Some((&g, rest)) = order.split_first() {
            for range in &self.groups[g] {
                for v in range.lo..=range.hi {
                    chosen[g] = (v, range.width);
                    self.walk(rest, chosen, out);
                }
            }
            return;
        }
        // Every group but the last is chosen: build the common prefix once, then append
        // each number of the last group to it.
        let last = self.groups.len() - 1;
        let mut prefix = String::new();
        for (g, lit) in self.lits.iter().enumerate() {
            prefix.push_str(lit);
            if g < last {
                push_padded(&mut prefix, chosen[g].0, chosen[g].1);
            }
        }
        for range in &self.groups[last] {
            for v in range.lo..=range.hi {
                let mut name = String::with_capacity(prefix.len() + range.width.max(20));
                name.push_str(&prefix);
                push_padded(&mut name, v, range.width);
                out.push(name);
            }
        }
    }
}

/// Splits the expression into items (at `,`, space and tab outside brackets) and parses
/// each one.
fn parse(expr: &str) -> Result<Vec<Item<'_>>, HostlistError> {
    let mut items = Vec::new();
    let mut start = 0;
    let mut in_bracket = false;
    // The first separator inside the open bracket, if any: a `[` after it means the first
    // bracket was left open (`n[1-3,m[4]`), not that brackets are nested (`n[1-[2]]`).
    let mut separator_in_bracket: Option<usize> = None;
    for (i, ch) in expr.char_indices() {
        match ch {
            ',' | ' ' | '\t' if !in_bracket => {
                if i > start {
                    items.push(parse_item(&expr[start..i])?);
                }
                start = i + 1;
            }
            ',' | ' ' | '\t' => {
                separator_in_bracket.get_or_insert(i);
            }
            '[' if in_bracket => {
                return Err(match separator_in_bracket {
                    Some(end) => HostlistError::UnclosedBracket { item: excerpt(&expr[start..end]) },
                    None => HostlistError::NestedBracket { item: excerpt(token_around(expr, start, i)) },
                })
            }
            '[' => {
                in_bracket = true;
                separator_in_bracket = None;
            }
            ']' if !in_bracket => {
                return Err(HostlistError::UnmatchedBracket { item: excerpt(token_around(expr, start, i)) })
            }
            ']' => in_bracket = false,
            c if c.is_control() => {
                return Err(HostlistError::InvalidCharacter {
                    ch: c,
                    item: excerpt(token_around(expr, start, i)),
                })
            }
            _ => {}
        }
    }
    if in_bracket {
        let end = separator_in_bracket.unwrap_or(expr.len());
        return Err(HostlistError::UnclosedBracket { item: excerpt(&expr[start..end]) });
    }
    if start < expr.len() {
        items.push(parse_item(&expr[start..])?);
    }
    Ok(items)
}

/// The item that contains position `at`, for error messages: from its start to the next
/// separator (bracket structure is broken there, so any separator will do).
fn token_around(expr: &str, start: usize, at: usize) -> &str {
    let end = expr[at..].find([',', ' ', '\t']).map_or(expr.len(), |n| at + n);
    &expr[start..end]
}

/// Parses one item whose brackets are known to be balanced and not nested.
fn parse_item(item: &str) -> Result<Item<'_>, HostlistError> {
    let mut lits = Vec::new();
    let mut groups = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = open + rest[open..].find(']').expect("brackets are balanced");
        lits.push(&rest[..open]);
        groups.push(parse_group(&rest[open + 1..close], item)?);
        rest = &rest[close + 1..];
    }
    if groups.is_empty() {
        check_suffix(item)?;
        lits.push(item);
    } else if !rest.is_empty() {
        return Err(HostlistError::TextAfterBracket { item: excerpt(item) });
    }
    Ok(Item { lits, groups })
}

/// A plain name's numeric suffix must be a number Slurm reads back unchanged.
fn check_suffix(name: &str) -> Result<(), HostlistError> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && parse_number(&name[name.len() - digits..]).is_none() {
        return Err(HostlistError::NumberTooLarge {
            number: excerpt(&name[name.len() - digits..]),
            item: excerpt(name),
        });
    }
    Ok(())
}

/// Parses the inside of one bracket group: `N` and `LO-HI` ranges separated by commas.
fn parse_group(body: &str, item: &str) -> Result<Vec<Range>, HostlistError> {
    if body.is_empty() {
        return Err(HostlistError::EmptyBrackets { item: excerpt(item) });
    }
    let mut ranges = Vec::new();
    for text in body.split(',') {
        if ranges.len() == MAX_RANGES_PER_GROUP {
            return Err(HostlistError::TooManyRanges { item: excerpt(item) });
        }
        ranges.push(parse_range(text, item)?);
    }
    Ok(ranges)
}

fn parse_range(text: &str, item: &str) -> Result<Range, HostlistError> {
    let invalid =
        |problem| HostlistError::InvalidRange { range: excerpt(text), item: excerpt(item), problem };
    if text.is_empty() {
        return Err(invalid(RangeProblem::Empty));
    }
    let (lo_text, hi_text) = text.split_once('-').unwrap_or((text, text));
    let is_number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !is_number(lo_text) || !is_number(hi_text) {
        return Err(invalid(RangeProblem::NotNumeric));
    }
    let number = |s: &str| {
        parse_number(s)
            .ok_or_else(|| HostlistError::NumberTooLarge { number: excerpt(s), item: excerpt(item) })
    };
    let (lo, hi) = (number(lo_text)?, number(hi_text)?);
    if lo > hi {
        return Err(invalid(RangeProblem::Descending));
    }
    if hi - lo >= MAX_RANGE_HOSTS {
        return Err(invalid(RangeProblem::TooManyHosts));
    }
    Ok(Range { lo, hi, width: lo_text.len() })
}

/// Parses decimal digits (any number of leading zeros) into a number ≤ [`MAX_NUMBER`].
fn parse_number(digits: &str) -> Option<u64> {
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Some(0);
    }
    significant.parse::<u64>().ok().filter(|&n| n <= MAX_NUMBER)
}

/// Appends `value` in decimal, zero-padded to `width` digits (`printf("%0*lu")`).
fn push_padded(out: &mut String, value: u64, width: usize) {
    let mut buf = [0u8; 20];
    let mut pos = buf.len();
    let mut v = value;
    loop {
        pos -= 1;
        buf[pos] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let digits = buf.len() - pos;
    for _ in digits..width {
        out.push('0');
    }
    // The buffer holds ASCII digits only.
    out.push_str(std::str::from_utf8(&buf[pos..]).expect("ASCII digits"));
}

/// Quotes at most [`EXCERPT_CHARS`] characters of `s` for an error message, with control
/// characters escaped (`\n`, `\u{85}`): the message stays one printable line, and a hostlist
/// cannot forge lines in a log or the journal.
fn excerpt(s: &str) -> String {
    let head = match s.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => &s[..cut],
        None => s,
    };
    let mut out = escape_control(head);
    if head.len() < s.len() {
        out.push('…');
    }
    out
}

/// `s` with every control character written as its Rust escape (`\t`, `\n`, `\u{7f}`); other
/// characters, quotes and backslashes included, are kept as they are.
pub fn escape_control(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { c.escape_debug().to_string() } else { c.to_string() }).collect()
}

/// A run of names for [`compress`]: `prefix` followed by the numbers `lo..=hi` padded to
/// `width`, or (when `single`) just `prefix`, a name without a usable numeric suffix.
/// This is Slurm's `hostrange`.
struct Run<'a> {
    prefix: &'a str,
    lo: u64,
    hi: u64,
    width: usize,
    single: bool,
}

impl<'a> Run<'a> {
    /// Slurm's `hostname_create`: the numeric suffix is the trailing run of digits.
    fn of(name: &'a str) -> Self {
        let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let suffix = &name[prefix.len()..];
        match parse_number(suffix) {
            Some(n) if !suffix.is_empty() => Run { prefix, lo: n, hi: n, width: suffix.len(), single: false },
            _ => Run { prefix: name, lo: 0, hi: 0, width: 0, single: true },
        }
    }

    /// Slurm's `hostlist_push_range`: a name joins the previous run only when it is the
    /// next number, with the same prefix and an equivalent zero padding.
    fn try_extend(&mut self, next: &Run<'_>) -> bool {
        if self.single || next.single || self.hi.checked_add(1) != Some(next.lo) || self.prefix != next.prefix
        {
            return false;
        }
        let mut next_width = next.width;
        if !width_equiv(self.lo, &mut self.width, next.lo, &mut next_width) {
            return false;
        }
        self.hi = next.hi;
        true
    }

    /// Slurm's `hostrange_within_range`: two runs go in one bracket when both have a
    /// numeric suffix and their prefixes are equal.
    fn same_bracket(&self, other: &Run<'_>) -> bool {
        !self.single && !other.single && self.prefix == other.prefix
    }
}

/// Slurm's `_zero_padded`: how many zeros `%0*lu` puts before `num` at `width`.
fn zero_padded(num: u64, width: usize) -> usize {
    let digits = num.checked_ilog10().map_or(1, |d| d as usize + 1);
    width.saturating_sub(digits)
}

/// Slurm's `_width_equiv`: widths `wn` (for `n`) and `wm` (for `m`) are equivalent when
/// they are equal, or when using one of them for both numbers changes the padding of
/// neither. On success the width that would change a padding is set to the other one.
fn width_equiv(n: u64, wn: &mut usize, m: u64, wm: &mut usize) -> bool {
    if *wn == *wm {
        return true;
    }
    let npad = zero_padded(n, *wn);
    let nmpad = zero_padded(n, *wm);
    let mpad = zero_padded(m, *wm);
    let mnpad = zero_padded(m, *wn);
    if npad != nmpad && mpad != mnpad {
        false
    } else {
        if npad != nmpad {
            *wm = *wn;
        } else {
            *wn = *wm;
        }
        true
    }
}

#[cfg(test)]
#[path = "hostlist_tests.rs"]
mod tests;
