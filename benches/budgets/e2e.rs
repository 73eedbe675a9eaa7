//! stub
use crate::table::Table;
use crate::Ctx;
pub fn run(_ctx: &Ctx, _t: &mut Table) {}
