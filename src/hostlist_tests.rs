//! Table tests of hostlist expansion and compression, with Slurm's own answers as the expectations.

use super::*;

fn names(list: &str) -> Vec<String> {
    list.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn expands_like_scontrol_show_hostnames() {
    // Every expectation was taken from Slurm 22.05.8's `scontrol show hostnames`.
    let cases: &[(&str, &str)] = &[
        ("", ""),
        ("n1", "n1"),
        ("abc", "abc"),
        ("a1b", "a1b"),
        ("n0", "n0"),
        ("n007", "n007"),
        ("n[1-3]", "n1 n2 n3"),
        ("n[3]", "n3"),
        ("n[0-0]", "n0"),
        ("n[00-00]", "n00"),
        ("gpu-[001-003]", "gpu-001 gpu-002 gpu-003"),
        ("x-[01-03,7],y-9", "x-01 x-02 x-03 x-7 y-9"),
        // Padding comes from the text of LO, whatever the width of HI.
        ("n[1-010]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10"),
        ("n[01-5]", "n01 n02 n03 n04 n05"),
        ("n[001-10]", "n001 n002 n003 n004 n005 n006 n007 n008 n009 n010"),
        ("n[010-12]", "n010 n011 n012"),
        ("n[9-010]", "n9 n10"),
        ("n[0001-0003,2]", "n0001 n0002 n0003 n2"),
        // Several groups multiply; the last varies fastest, then first, second, ...
        ("n[1-2]-[5-6]", "n1-5 n1-6 n2-5 n2-6"),
        ("a[1-2][3-4]", "a13 a14 a23 a24"),
        ("n[1-2]x[3-4]", "n1x3 n1x4 n2x3 n2x4"),
        ("[1-2]b[3-4]", "1b3 1b4 2b3 2b4"),
        ("a[1-2]b[1-2]c[1-2]", "a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 a1b2c2 a2b2c1 a2b2c2"),
        (
            "a[1-2]b[1-2]c[1-2]d[1-2]",
            "a1b1c1d1 a1b1c1d2 a2b1c1d1 a2b1c1d2 a1b2c1d1 a1b2c1d2 a2b2c1d1 a2b2c1d2 \
             a1b1c2d1 a1b1c2d2 a2b1c2d1 a2b1c2d2 a1b2c2d1 a1b2c2d2 a2b2c2d1 a2b2c2d2",
        ),
        // Empty items are dropped; space and tab separate like commas.
        ("a,b,,c", "a b c"),
        (",a,b,", "a b"),
        (",", ""),
        ("a b", "a b"),
        ("a\tb", "a b"),
        (" a, b ", "a b"),
        ("a [1-2]", "a 1 2"),
        ("[1-3]", "1 2 3"),
        // Order and duplicates are kept.
        ("n1,n1,n2", "n1 n1 n2"),
        ("n[1-3],n[2-4]", "n1 n2 n3 n2 n3 n4"),
        ("n[1-3,2-4]", "n1 n2 n3 n2 n3 n4"),
        ("n[5,1-2]", "n5 n1 n2"),
        ("a[1-2],b[1-2]", "a1 a2 b1 b2"),
        // Any other character is part of a name.
        ("A[1-2]", "A1 A2"),
        ("n.x[1-2]", "n.x1 n.x2"),
        ("n-[1-2]", "n-1 n-2"),
        ("n000000000000000000001", "n000000000000000000001"),
        ("n[18446744073709551613-18446744073709551614]", "n18446744073709551613 n18446744073709551614"),
    ];
    for (expr, want) in cases {
        assert_eq!(expand(expr).unwrap(), names(want), "expand({expr:?})");
    }
}

#[test]
fn rejects_what_slurm_rejects() {
    use RangeProblem::*;
    let range = |r: &str, item: &str, problem| HostlistError::InvalidRange {
        range: r.into(),
        item: item.into(),
        problem,
    };
    let cases: Vec<(&str, HostlistError)> = vec![
        ("a[3-1]", range("3-1", "a[3-1]", Descending)),
        ("ok,a[3-1]", range("3-1", "a[3-1]", Descending)),
        ("n[a-b]", range("a-b", "n[a-b]", NotNumeric)),
        ("n[-1]", range("-1", "n[-1]", NotNumeric)),
        ("n[1--2]", range("1--2", "n[1--2]", NotNumeric)),
        ("n[1x2]", range("1x2", "n[1x2]", NotNumeric)),
        ("n[1-2 ]", range("1-2 ", "n[1-2 ]", NotNumeric)),
        ("n[1,,2]", range("", "n[1,,2]", Empty)),
        ("n[1,2,]", range("", "n[1,2,]", Empty)),
        ("n[,1]", range("", "n[,1]", Empty)),
        ("n[1-65537]", range("1-65537", "n[1-65537]", TooManyHosts)),
        ("n[1-100000]", range("1-100000", "n[1-100000]", TooManyHosts)),
        ("n[]", HostlistError::EmptyBrackets { item: "n[]".into() }),
        ("n[1-2]x", HostlistError::TextAfterBracket { item: "n[1-2]x".into() }),
        ("x[1-2]y,z", HostlistError::TextAfterBracket { item: "x[1-2]y".into() }),
        ("n[[1-2]]", HostlistError::NestedBracket { item: "n[[1-2]]".into() }),
        ("n[1-[2-3]]", HostlistError::NestedBracket { item: "n[1-[2-3]]".into() }),
        ("a[1-2]],b", HostlistError::UnmatchedBracket { item: "a[1-2]]".into() }),
        ("n[1-2]\nx", HostlistError::InvalidCharacter { ch: '\n', item: "n[1-2]\\nx".into() }),
    ];
    for (expr, want) in cases {
        assert_eq!(expand(expr), Err(want), "expand({expr:?})");
    }
}

#[test]
fn rejects_where_slurm_is_lenient_but_odd() {
    // Slurm's answer in the comment; see the module docs for why we refuse.
    let cases: Vec<(&str, HostlistError)> = vec![
        // Slurm: `n]`.
        ("n[1-3", HostlistError::UnclosedBracket { item: "n[1-3".into() }),
        // Slurm: `n]`, `m3`; and `n[1-3,m4`, `n[1-3,m5`.
        ("n[1-2,m3", HostlistError::UnclosedBracket { item: "n[1-2".into() }),
        ("n[1-3,m[4-5]", HostlistError::UnclosedBracket { item: "n[1-3".into() }),
        // Slurm: the literal names `n]` and `n1-2]`.
        ("n]", HostlistError::UnmatchedBracket { item: "n]".into() }),
        ("n1-2]", HostlistError::UnmatchedBracket { item: "n1-2]".into() }),
        // Slurm: `n1`; `n01 n02 n03`; `n01 n02 n03`; `n1 n02`.
        (
            "n[1-]",
            HostlistError::InvalidRange {
                range: "1-".into(),
                item: "n[1-]".into(),
                problem: RangeProblem::NotNumeric,
            },
        ),
        (
            "n[+1-3]",
            HostlistError::InvalidRange {
                range: "+1-3".into(),
                item: "n[+1-3]".into(),
                problem: RangeProblem::NotNumeric,
            },
        ),
        (
            "n[ 1-3]",
            HostlistError::InvalidRange {
                range: " 1-3".into(),
                item: "n[ 1-3]".into(),
                problem: RangeProblem::NotNumeric,
            },
        ),
        (
            "n[1, 2]",
            HostlistError::InvalidRange {
                range: " 2".into(),
                item: "n[1, 2]".into(),
                problem: RangeProblem::NotNumeric,
            },
        ),
        // Slurm: `n18446744073709551615` (saturated) and nothing at all.
        (
            "n18446744073709551616",
            HostlistError::NumberTooLarge {
                number: "18446744073709551616".into(),
                item: "n18446744073709551616".into(),
            },
        ),
        (
            "n[18446744073709551614-18446744073709551615]",
            HostlistError::NumberTooLarge {
                number: "18446744073709551615".into(),
                item: "n[18446744073709551614-18446744073709551615]".into(),
            },
        ),
        (
            "n[99999999999999999999]",
            HostlistError::NumberTooLarge {
                number: "99999999999999999999".into(),
                item: "n[99999999999999999999]".into(),
            },
        ),
    ];
    for (expr, want) in cases {
        assert_eq!(expand(expr), Err(want), "expand({expr:?})");
    }
}

#[test]
fn error_messages_name_the_problem() {
    let msg = |expr: &str| expand(expr).unwrap_err().to_string();
    assert_eq!(msg("a[3-1]"), "invalid range '3-1' in 'a[3-1]': the start is greater than the end");
    assert_eq!(msg("n[1-3"), "unclosed '[' in 'n[1-3'");
    assert_eq!(msg("n[]"), "empty brackets '[]' in 'n[]'");
    assert_eq!(msg("a[1-1000]b[1-1001]"), "'a[1-1000]b[1-1001]' expands to more than 1000000 names");
    // A huge argument is quoted, not echoed whole.
    let long = format!("{}]", "x".repeat(10_000));
    assert!(msg(&long).len() < 300, "{}", msg(&long));
}

#[test]
fn caps_total_names_before_building_any() {
    assert_eq!(expand("a[1-1000]b[1-1000]").unwrap().len(), MAX_NAMES);
    let too_many = [
        "a[1-1000]b[1-1001]",
        "a[1-1000]b[1-1000],c",
        "a[1-65536]b[1-65536]c[1-65536]d[1-65536]",
        "n[1-65536],n[1-65536],n[1-65536],n[1-65536],n[1-65536],n[1-65536],\
         n[1-65536],n[1-65536],n[1-65536],n[1-65536],n[1-65536],n[1-65536],\
         n[1-65536],n[1-65536],n[1-65536],n[1-65536]",
    ];
    for expr in too_many {
        assert!(
            matches!(expand(expr), Err(HostlistError::TooManyNames { limit, .. }) if limit == MAX_NAMES),
            "{expr}"
        );
    }
    // Slurm's per-range limit is inclusive.
    assert_eq!(expand("n[1-65536]").unwrap().len(), 65_536);
}

#[test]
fn limits_ranges_per_bracket_like_slurm() {
    let list = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    assert_eq!(expand(&format!("n[{}]", list(MAX_RANGES_PER_GROUP))).unwrap().len(), MAX_RANGES_PER_GROUP);
    assert!(matches!(
        expand(&format!("n[{}]", list(MAX_RANGES_PER_GROUP + 1))),
        Err(HostlistError::TooManyRanges { .. })
    ));
}

#[test]
fn compresses_like_scontrol_show_hostlist() {
    // Every expectation was taken from Slurm 22.05.8's `scontrol show hostlist`.
    let cases: &[(&str, &str)] = &[
        ("", ""),
        ("n1", "n1"),
        ("n1 n2 n3 n05 n06 m1", "n[1-3,05-06],m1"),
        ("n3 n1 n2", "n[3,1-2]"),
        ("n2 n1", "n[2,1]"),
        ("n1 n3 n2", "n[1,3,2]"),
        ("n1 n1", "n[1,1]"),
        ("n1 n2 n1 n2", "n[1-2,1-2]"),
        ("n1 m1 n2", "n1,m1,n2"),
        ("a1 b1 a2 b2", "a1,b1,a2,b2"),
        ("n9 n10", "n[9-10]"),
        ("n09 n10", "n[09-10]"),
        ("n9 n010", "n[9,010]"),
        ("n99 n100", "n[99-100]"),
        ("n05 n5", "n[05,5]"),
        ("n08 n9", "n[08,9]"),
        ("n8 n09", "n[8,09]"),
        ("n0 n00", "n[0,00]"),
        ("n0 n1 n00 n01", "n[0-1,00-01]"),
        ("n1 n2 n04 n3", "n[1-2,04,3]"),
        ("a b a", "a,b,a"),
        ("x x", "x,x"),
        ("a a1 a2", "a,a[1-2]"),
        ("a1 a a2", "a1,a,a2"),
        ("n1 x n2", "n1,x,n2"),
        ("n01-1 n1-2", "n01-1,n1-2"),
        ("n01-1 n01-2", "n01-[1-2]"),
        ("1 2 3", "[1-3]"),
        ("1 2 3 a", "[1-3],a"),
        ("n1x n2x", "n1x,n2x"),
        ("n1- n1 n2-", "n1-,n1,n2-"),
        ("n1-5 n1-6 n2-5 n2-6", "n1-[5-6],n2-[5-6]"),
        ("gpu-001 gpu-002 gpu-003 gpu-004 gpu-4", "gpu-[001-004,4]"),
        ("n1 n2 n1 n2 n3", "n[1-2,1-3]"),
        ("n9 n10 n11 n12 n13", "n[9-13]"),
        ("n8 n9 n010", "n[8-9,010]"),
        ("n000000000000000000001 n000000000000000000002", "n[000000000000000000001-000000000000000000002]"),
        ("n18446744073709551613 n18446744073709551614", "n[18446744073709551613-18446744073709551614]"),
    ];
    for (list, want) in cases {
        assert_eq!(compress(&names(list)), *want, "compress({list:?})");
    }
}

#[test]
fn compress_keeps_names_whose_suffix_slurm_cannot_read() {
    // Slurm prints `n[18446744073709551615,18446744073709551615]` here: two other names.
    let list = ["n18446744073709551615", "n18446744073709551616"];
    assert_eq!(compress(&list), "n18446744073709551615,n18446744073709551616");
}

#[test]
fn width_equiv_matches_slurm() {
    // (n, wn, m, wm) -> (equivalent, wn', wm')
    let cases = [
        ((9, 1, 10, 2), (true, 1, 1)),
        ((9, 1, 10, 3), (false, 1, 3)),
        ((99, 2, 100, 3), (true, 2, 2)),
        ((5, 2, 10, 2), (true, 2, 2)),
        ((100, 3, 101, 4), (false, 3, 4)),
        ((1, 1, 101, 3), (true, 1, 1)),
    ];
    for ((n, mut wn, m, mut wm), (eq, wn2, wm2)) in cases {
        assert_eq!(width_equiv(n, &mut wn, m, &mut wm), eq, "{n} {m}");
        assert_eq!((wn, wm), (wn2, wm2), "{n} {m}");
    }
}

#[test]
fn compress_of_expand_expands_back() {
    let exprs = [
        "n[1-3,05-06],m1",
        "x-[01-03,7],y-9",
        "n[1-2]-[5-6]",
        "a[1-2]b[1-2]c[1-2]",
        "n[1-3],n[2-4],n[3,1-2]",
        "n[9-12],n[010-011],n",
        "[1-3],a,b[0-0]",
    ];
    for expr in exprs {
        let names = expand(expr).unwrap();
        assert_eq!(expand(&compress(&names)).unwrap(), names, "{expr}");
    }
}

#[test]
fn push_padded_is_printf_zero_pad() {
    for (v, w) in [(0, 0), (0, 1), (0, 3), (7, 3), (123, 2), (u64::MAX, 25)] {
        let mut s = String::new();
        push_padded(&mut s, v, w);
        assert_eq!(s, format!("{v:0w$}"));
    }
}

#[test]
#[allow(clippy::disallowed_methods)] // measures this code's own speed, a coarse guard under `make bench`
fn ten_thousand_names_are_fast() {
    // The resume hook's budget is 100 ms for the whole process; these must be a small
    // part of it even in a debug build (release is ~10x faster).
    let expr = "hpc-a3u-[0-4999],hpc-g2-[00000-04999]";
    let start = std::time::Instant::now();
    let names = expand(expr).unwrap();
    let expanded = start.elapsed();
    let start = std::time::Instant::now();
    let back = compress(&names);
    let compressed = start.elapsed();
    assert_eq!(names.len(), 10_000);
    assert_eq!(back, expr);
    println!("10,000 names: expand {expanded:?}, compress {compressed:?}");
    assert!(expanded.as_millis() < 100, "expand took {expanded:?}");
    assert!(compressed.as_millis() < 100, "compress took {compressed:?}");
}
