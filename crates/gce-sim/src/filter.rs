//! The `filter` query parameter of list methods, in the two styles GCE accepts (not mixed).
//!
//! * `name eq 'hpc-a3u-.*'` / `name ne '...'`: the value is an RE2 regular expression that must match
//!   the whole field (terms joined by spaces are ANDed);
//! * `labels.env = "prod"`, `status != RUNNING`, `name = "x*"`: exact comparison with `*` as a
//!   wildcard; terms joined by `AND` or spaces.
//!
//! Fields are paths into the resource's JSON (`labels.k`, `status`, `name`). Only the subset of RE2
//! that names and label values need is implemented (literals, `.`, classes, groups with `|`, `* + ?`).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq)]
struct Term {
    field: String,
    negate: bool,
    matcher: Matcher,
}

#[derive(Debug, Clone, PartialEq)]
enum Matcher {
    Regex(Regex),
    Glob(String),
}

impl Filter {
    /// Parses a filter expression; the error names what could not be understood.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let mut terms = Vec::new();
        let mut rest = text.trim();
        let mut regex_style: Option<bool> = None;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("AND ") {
                rest = r.trim_start();
                continue;
            }
            let rest_trimmed = rest.trim_start_matches('(');
            let (field, r) = split_word(rest_trimmed);
            let r = r.trim_start();
            let (op, r) = split_op(r).ok_or_else(|| format!("Invalid filter expression: '{text}'"))?;
            let (value, r) =
                split_value(r.trim_start()).ok_or_else(|| format!("Invalid filter expression: '{text}'"))?;
            rest = r.trim_start().trim_start_matches(')').trim_start();
            let is_regex = matches!(op, "eq" | "ne");
            if regex_style.is_some_and(|s| s != is_regex) {
                return Err(format!("Invalid filter expression: '{text}': mixed 'eq/ne' and '=/!=' styles"));
            }
            regex_style = Some(is_regex);
            let matcher = if is_regex { Matcher::Regex(Regex::parse(&value)?) } else { Matcher::Glob(value) };
            terms.push(Term { field: field.to_string(), negate: matches!(op, "ne" | "!="), matcher });
        }
        Ok(Filter { terms })
    }

    /// Whether the resource (its JSON) passes every term.
    pub fn matches(&self, resource: &Value) -> bool {
        self.terms.iter().all(|t| {
            let mut v = resource;
            for part in t.field.split('.') {
                v = v.get(part).unwrap_or(&Value::Null);
            }
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let hit = match &t.matcher {
                Matcher::Regex(re) => re.is_full_match(&text),
                Matcher::Glob(g) => glob(g, &text),
            };
            hit != t.negate
        })
    }
}

fn split_word(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| c.is_whitespace() || "=!:".contains(c)).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

fn split_op(s: &str) -> Option<(&'static str, &str)> {
    for op in ["!=", "=", ":", "eq ", "ne "] {
        if let Some(r) = s.strip_prefix(op) {
            let op = match op {
                "eq " => "eq",
                "ne " => "ne",
                ":" => "=",
                o => o,
            };
            return Some((op, r));
        }
    }
    None
}

fn split_value(s: &str) -> Option<(String, &str)> {
    let quote = s.chars().next()?;
    if quote == '"' || quote == '\'' {
        let end = s[1..].find(quote)? + 1;
        Some((s[1..end].to_string(), &s[end + 1..]))
    } else {
        let end = s.find(|c: char| c.is_whitespace() || c == ')').unwrap_or(s.len());
        if end == 0 {
            return None;
        }
        Some((s[..end].to_string(), &s[end..]))
    }
}

/// `*` matches any run of characters; everything else is literal.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            let Some(rest) = text.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len()).filter(|i| rest.is_char_boundary(*i)).any(|i| glob(tail, &rest[i..]))
        }
    }
}

/// A small backtracking regular expression, always matched against the whole text.
#[derive(Debug, Clone, PartialEq)]
pub struct Regex {
    alt: Vec<Vec<Piece>>,
}

#[derive(Debug, Clone, PartialEq)]
struct Piece {
    atom: Atom,
    min: usize,
    max: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
enum Atom {
    Char(char),
    Any,
    Class { negated: bool, ranges: Vec<(char, char)> },
    Group(Vec<Vec<Piece>>),
}

impl Regex {
    pub fn parse(pattern: &str) -> Result<Regex, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut pos = 0;
        let alt = parse_alt(&chars, &mut pos)
            .map_err(|e| format!("Invalid regular expression '{pattern}': {e}"))?;
        if pos != chars.len() {
            return Err(format!("Invalid regular expression '{pattern}': unbalanced ')'"));
        }
        Ok(Regex { alt })
    }

    pub fn is_full_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        match_alt(&self.alt, &chars, 0, &mut |end| end == chars.len())
    }
}

fn parse_alt(c: &[char], pos: &mut usize) -> Result<Vec<Vec<Piece>>, String> {
    let mut alt = vec![Vec::new()];
    while *pos < c.len() {
        let ch = c[*pos];
        let atom = match ch {
            ')' => break,
            '|' => {
                *pos += 1;
                alt.push(Vec::new());
                continue;
            }
            '^' | '$' => {
                *pos += 1;
                continue;
            }
            '.' => {
                *pos += 1;
                Atom::Any
            }
            '(' => {
                *pos += 1;
                if c[*pos..].starts_with(&['?', ':']) {
                    *pos += 2;
                }
                let inner = parse_alt(c, pos)?;
                if c.get(*pos) != Some(&')') {
                    return Err("missing ')'".into());
                }
                *pos += 1;
                Atom::Group(inner)
            }
            '[' => {
                *pos += 1;
                let negated = c.get(*pos) == Some(&'^');
                if negated {
                    *pos += 1;
                }
                let mut ranges = Vec::new();
                loop {
                    let Some(&lo) = c.get(*pos) else {
                        return Err("missing ']'".into());
                    };
                    if lo == ']' && !ranges.is_empty() {
                        *pos += 1;
                        break;
                    }
                    let lo = if lo == '\\' {
                        *pos += 1;
                        *c.get(*pos).ok_or("trailing '\\'")?
                    } else {
                        lo
                    };
                    *pos += 1;
                    if c.get(*pos) == Some(&'-') && c.get(*pos + 1).is_some_and(|&h| h != ']') {
                        ranges.push((lo, c[*pos + 1]));
                        *pos += 2;
                    } else {
                        ranges.push((lo, lo));
                    }
                }
                Atom::Class { negated, ranges }
            }
            '\\' => {
                *pos += 1;
                let e = *c.get(*pos).ok_or("trailing '\\'")?;
                *pos += 1;
                match e {
                    'd' => Atom::Class { negated: false, ranges: vec![('0', '9')] },
                    'w' => Atom::Class {
                        negated: false,
                        ranges: vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')],
                    },
                    other => Atom::Char(other),
                }
            }
            '*' | '+' | '?' | '{' => return Err(format!("nothing to repeat at {}", *pos)),
            other => {
                *pos += 1;
                Atom::Char(other)
            }
        };
        let (min, max) = match c.get(*pos) {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            _ => (1, Some(1)),
        };
        if (min, max) != (1, Some(1)) {
            *pos += 1;
        }
        alt.last_mut().expect("alt is never empty").push(Piece { atom, min, max });
    }
    Ok(alt)
}

/// Tries every branch; `k` is the continuation that must accept the end position.
fn match_alt(alt: &[Vec<Piece>], t: &[char], at: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
    alt.iter().any(|seq| match_seq(seq, t, at, k))
}

fn match_seq(seq: &[Piece], t: &[char], at: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
    let Some((first, rest)) = seq.split_first() else {
        return k(at);
    };
    match_repeat(first, 0, rest, t, at, k)
}

fn match_repeat(
    p: &Piece,
    count: usize,
    rest: &[Piece],
    t: &[char],
    at: usize,
    k: &mut dyn FnMut(usize) -> bool,
) -> bool {
    // Greedy: try one more repetition first, then stop here.
    if p.max.is_none_or(|m| count < m)
        && match_atom(&p.atom, t, at, &mut |next| next != at && match_repeat(p, count + 1, rest, t, next, k))
    {
        return true;
    }
    count >= p.min && match_seq(rest, t, at, k)
}

fn match_atom(a: &Atom, t: &[char], at: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
    match a {
        Atom::Group(alt) => match_alt(alt, t, at, k),
        _ => {
            let Some(&c) = t.get(at) else { return false };
            let ok = match a {
                Atom::Char(x) => *x == c,
                Atom::Any => c != '\n',
                Atom::Class { negated, ranges } => {
                    ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
                }
                Atom::Group(_) => unreachable!("handled above"),
            };
            ok && k(at + 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn regex_matches_whole_names() {
        let cases = [
            ("hpc-a3u-.*", "hpc-a3u-1", true),
            ("hpc-a3u-.*", "xhpc-a3u-1", false),
            ("hpc-a3u-[0-9]+", "hpc-a3u-10", true),
            ("hpc-a3u-[0-9]+", "hpc-a3u-1x", false),
            ("hpc-(a3u|gpu)-1", "hpc-gpu-1", true),
            ("hpc-(a3u|gpu)-1", "hpc-gpu-10", false),
            ("a?b*c", "c", true),
            ("hpc\\.x", "hpc.x", true),
            ("hpc\\.x", "hpcyx", false),
            ("(hpc-a-1|hpc-a-2)", "hpc-a-2", true),
        ];
        for (re, text, want) in cases {
            assert_eq!(Regex::parse(re).unwrap().is_full_match(text), want, "{re} vs {text}");
        }
        assert!(Regex::parse("(a").is_err());
    }

    #[test]
    fn both_filter_styles() {
        let vm = json!({"name": "hpc-a3u-3", "status": "RUNNING", "labels": {"env": "prod"}});
        assert!(Filter::parse("name eq 'hpc-a3u-.*'").unwrap().matches(&vm));
        assert!(!Filter::parse("name ne 'hpc-a3u-.*'").unwrap().matches(&vm));
        assert!(Filter::parse("labels.env = \"prod\"").unwrap().matches(&vm));
        assert!(Filter::parse("labels.env = \"prod\" AND status = RUNNING").unwrap().matches(&vm));
        assert!(!Filter::parse("(labels.env = \"dev\")").unwrap().matches(&vm));
        assert!(Filter::parse("name = \"hpc-*\"").unwrap().matches(&vm));
        assert!(Filter::parse("name eq 'x' labels.env = \"prod\"").is_err());
        assert!(Filter::parse("name ~ x").is_err());
    }
}
