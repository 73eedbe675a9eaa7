//! The forms config values must have (names, regions, URLs, template paths): pure predicates and
//! parsers that [`super::validate`] applies, each saying what GCE or Slurm accepts.

use std::net::{Ipv4Addr, Ipv6Addr};

/// `[a-z][a-z0-9]{0,9}`.
pub fn is_cluster_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_ascii_lowercase())
        && s.len() <= 10
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// `[a-z0-9]{1,14}`.
pub fn is_nodeset_name(s: &str) -> bool {
    (1..=14).contains(&s.len()) && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// An RFC 1035 label as GCE uses it: `[a-z]([-a-z0-9]*[a-z0-9])?`, 1..=63 characters.
pub fn is_rfc1035(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

pub(crate) fn is_project_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | ':'))
}

/// `us-central1`, `northamerica-northeast2`: letters, '-', letters, digits.
pub(crate) fn is_region(s: &str) -> bool {
    let Some((a, b)) = s.split_once('-') else {
        return false;
    };
    let letters = b.trim_end_matches(|c: char| c.is_ascii_digit());
    !a.is_empty()
        && a.chars().all(|c| c.is_ascii_lowercase())
        && !letters.is_empty()
        && letters.chars().all(|c| c.is_ascii_lowercase())
        && letters.len() < b.len()
}

/// What the config needs to know about an endpoint URL.
pub(crate) struct HttpUrl {
    pub(crate) scheme: &'static str,
    pub(crate) loopback: bool,
}

pub(crate) fn parse_http_url(s: &str) -> Result<HttpUrl, String> {
    let (scheme, rest) = if let Some(r) = s.strip_prefix("https://") {
        ("https", r)
    } else if let Some(r) = s.strip_prefix("http://") {
        ("http", r)
    } else {
        return Err("must start with https:// or http://".into());
    };
    if s.contains(|c: char| c.is_whitespace() || c == '?' || c == '#') {
        return Err("must be a base URL without spaces, query or fragment".into());
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err("must not carry user credentials".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (addr, after) = v6.split_once(']').ok_or("has an unclosed '[' in its host")?;
        let ip: Ipv6Addr = addr.parse().map_err(|_| format!("has an invalid IPv6 host {addr:?}"))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("has junk after its host")?),
        };
        return check_port(port).map(|()| HttpUrl { scheme, loopback: ip.is_loopback() });
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() || !host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.')) {
        return Err(format!("has an invalid host {host:?}"));
    }
    check_port(port)?;
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
    Ok(HttpUrl { scheme, loopback })
}

pub(crate) fn check_port(port: Option<&str>) -> Result<(), String> {
    match port {
        None => Ok(()),
        Some(p) if p.parse::<u16>().is_ok_and(|n| n > 0) => Ok(()),
        Some(p) => Err(format!("has an invalid port {p:?}")),
    }
}

/// A global or regional template, as a full URL (`https://…/compute/v1/projects/…`), a relative
/// URL (`projects/P/…`) or a partial one (`global/instanceTemplates/T`). A regional template must
/// be in `region` (the nodeset's, named by the config key `region_key`): a regional MIG can only use
/// a template of its own region (docs/gce-facts.md, "Regions").
pub(crate) fn check_template(t: &str, region: &str, region_key: &str) -> Result<(), String> {
    const FORMS: &str = "expected projects/P/global/instanceTemplates/T or \
                         projects/P/regions/R/instanceTemplates/T (or the full https:// URL)";
    let mut rest = t;
    if t.starts_with("https://") || t.starts_with("http://") {
        let after = t.split_once("://").map_or("", |(_, r)| r);
        let path = after.split_once('/').map_or("", |(_, p)| p);
        rest = ["compute/v1/", "compute/beta/", "compute/alpha/"]
            .iter()
            .find_map(|v| path.strip_prefix(v))
            .ok_or_else(|| format!("{t:?} is not a Compute API URL; {FORMS}"))?;
    }
    let parts: Vec<&str> = rest.split('/').collect();
    let parts = match parts.as_slice() {
        ["projects", p, tail @ ..] if !p.is_empty() => tail.to_vec(),
        ["projects", ..] => return Err(format!("{t:?} has an empty project; {FORMS}")),
        _ => parts,
    };
    let name = match parts.as_slice() {
        ["global", "instanceTemplates", name] => *name,
        ["regions", r, "instanceTemplates", name] => {
            if *r != region && !region.is_empty() {
                return Err(format!(
                    "{t:?} is a template of region {r:?}, but {region_key} is {region:?}: \
                     a regional MIG can only use a template of its own region"
                ));
            }
            *name
        }
        _ => return Err(format!("{t:?} is not an instance template; {FORMS}")),
    };
    if !is_rfc1035(name) {
        return Err(format!("{t:?}: template name {name:?} is not a valid resource name"));
    }
    Ok(())
}
