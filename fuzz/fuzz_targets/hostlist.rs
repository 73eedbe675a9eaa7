//! Fuzz `hostlist::expand` / `compress`: no panic, an error is one printable line, an expansion
//! stays under MAX_NAMES and compresses to an expression that expands back to the same list.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slurm_dws::hostlist::{compress, expand, MAX_NAMES};

fuzz_target!(|data: &[u8]| {
    let Ok(expr) = std::str::from_utf8(data) else { return };
    match expand(expr) {
        Err(e) => assert!(!e.to_string().contains(|c: char| c.is_control()), "{e}"),
        Ok(names) => {
            assert!(names.len() <= MAX_NAMES);
            if names.len() <= 20_000 {
                let compressed = compress(&names);
                assert_eq!(expand(&compressed).as_ref(), Ok(&names), "{compressed}");
            }
        }
    }
});
