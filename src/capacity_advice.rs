//! Capacity advice (`[nodeset.dws_flex] capacity_advice`): which zone(s) a request group's MIG is
//! given, from GCE's `advice.capacity` answer. Pure: the call, its timeout and its cache are at the
//! edge (`reconcile/advice.rs`).
//!
//! The rule (docs/operations.md, "Capacity advice"): the recommendation with the best
//! obtainability wins; the MIG gets the nodeset's zones among that recommendation's shards, in the
//! nodeset's order. Every zone of the nodeset when the advice failed, timed out, or named none of
//! them (advice is best effort: it never keeps a request from being sent).

use crate::gce::advice::CapacityAdviceResponse;

/// The zones chosen for a request group, GCE's score, and why, in words.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ZoneChoice {
    pub zones: Vec<String>,
    pub obtainability: Option<f64>,
    pub why: String,
}

/// The choice among `zones` (the nodeset's) given GCE's answer, or why there is none.
pub fn choose(zones: &[String], answer: Result<&CapacityAdviceResponse, &str>) -> ZoneChoice {
    let all = |why: String, obtainability| ZoneChoice { zones: zones.to_vec(), obtainability, why };
    let response = match answer {
        Ok(r) => r,
        Err(e) => return all(format!("no capacity advice ({e}): all zones"), None),
    };
    let best = response.recommendations.iter().max_by(|a, b| {
        let score = |r: &crate::gce::advice::AdviceRecommendation| {
            r.scores.as_ref().and_then(|s| s.obtainability).unwrap_or(-1.0)
        };
        score(a).total_cmp(&score(b))
    });
    let Some(best) = best else {
        return all("capacity advice gave no recommendation: all zones".into(), None);
    };
    let score = best.scores.as_ref().and_then(|s| s.obtainability);
    let named: Vec<&str> = best.shards.iter().map(|s| crate::gce::last_segment(&s.zone)).collect();
    let chosen: Vec<String> = zones.iter().filter(|z| named.contains(&z.as_str())).cloned().collect();
    let scored = score.map_or_else(|| "no score".to_string(), |s| format!("obtainability {s:.2}"));
    if chosen.is_empty() {
        return all(
            format!(
                "capacity advice named no zone of the nodeset ({}; {scored}): all zones",
                named.join(", ")
            ),
            score,
        );
    }
    let why = if chosen.len() == zones.len() {
        format!("capacity advice: every zone equally good ({scored})")
    } else {
        format!("capacity advice: {} best ({scored}) of {}", chosen.join(", "), zones.join(", "))
    };
    ZoneChoice { zones: chosen, obtainability: score, why }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gce::advice::{AdviceRecommendation, AdviceScores, AdviceShard};

    fn rec(score: Option<f64>, zones: &[&str]) -> AdviceRecommendation {
        AdviceRecommendation {
            scores: Some(AdviceScores { obtainability: score }),
            shards: zones
                .iter()
                .map(|z| AdviceShard {
                    zone: z.to_string(),
                    machine_type: "a3-ultragpu-8g".into(),
                    instance_count: Some(4),
                })
                .collect(),
        }
    }

    #[test]
    fn the_best_recommendation_decides_the_zones() {
        let zones: Vec<String> =
            ["us-central1-a", "us-central1-b", "us-central1-c"].map(String::from).to_vec();
        let answer = |recs: Vec<AdviceRecommendation>| CapacityAdviceResponse { recommendations: recs };
        for (what, recs, want, score, why) in [
            ("one zone best", vec![rec(Some(0.82), &["us-central1-b"])], vec!["us-central1-b"], Some(0.82),
             "capacity advice: us-central1-b best (obtainability 0.82) of us-central1-a, us-central1-b, us-central1-c"),
            ("a tie: two zones, nodeset order", vec![rec(Some(0.5), &["us-central1-c", "us-central1-a"])],
             vec!["us-central1-a", "us-central1-c"], Some(0.5), "capacity advice: us-central1-a, us-central1-c best"),
            ("every zone", vec![rec(Some(0.3), &["us-central1-a", "us-central1-b", "us-central1-c"])],
             vec!["us-central1-a", "us-central1-b", "us-central1-c"], Some(0.3), "every zone equally good (obtainability 0.30)"),
            ("several recommendations: the best score", vec![rec(Some(0.2), &["us-central1-a"]), rec(Some(0.9), &["us-central1-c"])],
             vec!["us-central1-c"], Some(0.9), "us-central1-c best (obtainability 0.90)"),
            ("full zone URLs", vec![rec(Some(0.7), &["https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b"])],
             vec!["us-central1-b"], Some(0.7), "us-central1-b best"),
            ("a zone not the nodeset's", vec![rec(Some(0.9), &["us-central1-f"])],
             vec!["us-central1-a", "us-central1-b", "us-central1-c"], Some(0.9), "named no zone of the nodeset (us-central1-f; obtainability 0.90): all zones"),
            ("no recommendation", vec![], vec!["us-central1-a", "us-central1-b", "us-central1-c"], None, "gave no recommendation: all zones"),
            ("no score", vec![rec(None, &["us-central1-a"])], vec!["us-central1-a"], None, "us-central1-a best (no score)"),
        ] {
            let c = choose(&zones, Ok(&answer(recs)));
            assert_eq!(c.zones, want, "{what}");
            assert_eq!(c.obtainability, score, "{what}");
            assert!(c.why.contains(why), "{what}: {}", c.why);
        }
    }

    #[test]
    fn a_failed_call_gives_every_zone() {
        let zones: Vec<String> = ["us-east5-a", "us-east5-b"].map(String::from).to_vec();
        let c = choose(&zones, Err("no answer within 2 s"));
        assert_eq!((c.zones, c.obtainability), (zones.clone(), None));
        assert_eq!(c.why, "no capacity advice (no answer within 2 s): all zones");
    }
}
