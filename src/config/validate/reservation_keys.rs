//! `[nodeset.reservation]` as `validate` resolves it: the table's presence against
//! `provisioning_model`, and each problem `config::reservation` finds, with its key and line.

use super::{Checker, Problem, ProvisioningModel, RawReservation, ReservedCapacity, Val};

/// `[nodeset.reservation]`: there exactly when `provisioning_model = "reservation"` (`reservation.rs`).
pub(super) fn resolve_reservation(
    ck: &mut Checker,
    i: usize,
    raw: Option<RawReservation>,
    model: ProvisioningModel,
    zones: &[String],
) -> Option<ReservedCapacity> {
    use crate::config::reservation::Field;
    let key = |f: Field| format!("nodeset[{i}].{}", f.key());
    match raw {
        None if model.is_reservation() => ck.bad::<()>(
            &key(Field::Table),
            &None,
            "is required with provisioning_model = \"reservation\": name or future_reservation",
        ),
        Some(raw) if !model.is_reservation() => ck.bad(
            &key(Field::Name),
            &raw.name,
            format!("is for provisioning_model = \"reservation\"; this nodeset is {model}"),
        ),
        Some(raw) => {
            let (name, future, grace) =
                (get_opt(&raw.name), get_opt(&raw.future_reservation), get_opt(&raw.eol_grace));
            let (capacity, problems) = crate::config::reservation::resolve(name, future, grace, zones);
            for (field, message) in problems {
                let line = match field {
                    Field::Name | Field::Table => ck.line(&raw.name),
                    Field::FutureReservation => ck.line(&raw.future_reservation),
                    Field::EolGrace => ck.line(&raw.eol_grace),
                };
                ck.problems.push(Problem { key: key(field), line, message });
            }
            return capacity;
        }
        None => {}
    }
    None
}

fn get_opt<T: Clone>(v: &Val<T>) -> Option<T> {
    v.as_ref().map(|s| s.get_ref().clone())
}
