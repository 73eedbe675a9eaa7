//! Property tests: `compress` and `expand` are inverses, and `expand` never panics.
//!
//! `compress` keeps order and duplicates, so expanding what it prints must give back the
//! very same list, whatever the names, prefixes, paddings and repetitions.

use proptest::prelude::*;
use slurm_dws::hostlist::{compress, expand};

/// A node name as Slurm and GCE would have them: letters, digits, `-`, `.` and `_`, often
/// ending in a zero-padded number, sometimes with digits inside the prefix too.
fn name() -> impl Strategy<Value = String> {
    ("[a-c]{0,2}(-[0-9]{1,2}-)?[a-c.-]{0,2}", proptest::option::of((0u64..1200, 0usize..5))).prop_map(
        |(prefix, number)| match number {
            Some((n, width)) => format!("{prefix}{n:0width$}"),
            None if prefix.is_empty() => "x".to_owned(),
            None => prefix,
        },
    )
}

/// A list of names with runs (consecutive numbers), repeats and shuffles mixed in.
fn names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![
            name().prop_map(|n| vec![n]),
            ("[a-c-]{0,3}", 0u64..1000, 1u64..30, 0usize..4)
                .prop_map(|(prefix, lo, len, width)| (lo..lo + len)
                    .map(|n| format!("{prefix}{n:0width$}"))
                    .collect()),
        ],
        0..12,
    )
    .prop_map(|chunks| chunks.concat())
}

/// A valid expression: items of text and up to three bracket groups of ranges.
fn expression() -> impl Strategy<Value = String> {
    let range = (0u64..1100, 0u64..15, 0usize..4, 0usize..3).prop_map(|(lo, len, w, hi_w)| {
        if len == 0 {
            format!("{lo:0w$}")
        } else {
            format!("{lo:0w$}-{:0hi_w$}", lo + len)
        }
    });
    let group = prop::collection::vec(range, 1..4).prop_map(|r| format!("[{}]", r.join(",")));
    let item = ("[a-z]{0,3}-?", prop::collection::vec(("[a-z0-9-]{0,2}", group), 0..4)).prop_map(
        |(head, groups)| {
            let mut item = head;
            for (i, (between, group)) in groups.iter().enumerate() {
                if i > 0 {
                    item.push_str(between);
                }
                item.push_str(group);
            }
            if item.is_empty() {
                item.push('z');
            }
            item
        },
    );
    prop::collection::vec(item, 1..4).prop_map(|items| items.join(","))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn compressed_names_expand_back(names in names()) {
        let compressed = compress(&names);
        prop_assert_eq!(expand(&compressed), Ok(names), "compressed: {}", compressed);
    }

    #[test]
    fn compress_of_expand_expands_back(expr in expression()) {
        // Expressions with a huge product are fine to reject; everything else round-trips.
        if let Ok(names) = expand(&expr) {
            let compressed = compress(&names);
            prop_assert_eq!(expand(&compressed), Ok(names), "{} -> {}", expr, compressed);
        }
    }

    #[test]
    fn compress_is_idempotent_through_expand(expr in expression()) {
        if let Ok(names) = expand(&expr) {
            let once = compress(&names);
            let twice = compress(&expand(&once).unwrap());
            prop_assert_eq!(once, twice);
        }
    }

    #[test]
    fn expand_never_panics(expr in "[\\[\\]0-9a-c, \t-]{0,40}") {
        let _ = expand(&expr);
    }

    #[test]
    fn expand_never_panics_on_any_text(expr in "\\PC{0,40}") {
        let _ = expand(&expr);
    }
}
