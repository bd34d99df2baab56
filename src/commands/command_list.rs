//! COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern], as Redis 7.0
//! answers it: every command and every subcommand (`config|get`), by full name. A
//! container's subcommands are Redis's (the ACL table, `acl::table`) less those Tessera
//! has not built yet (`NOT_BUILT`).

use super::{Args, Ctx, lossy};
use crate::acl::table;

/// Subcommands of Tessera's containers that Redis 7.0 has and Tessera does not yet (none
/// at present: a subcommand added to a container whose handler lacks it goes here).
pub(super) const NOT_BUILT: &[&str] = &[];

/// The filter of a COMMAND LIST.
enum Filter<'a> {
    All,
    /// Modules' commands: Tessera loads no module.
    Module,
    /// Commands in this ACL category (None: no such category, so none).
    Category(Option<usize>),
    Pattern(&'a [u8]),
}

/// Replies COMMAND LIST; `options`: what follows LIST.
pub fn command_list(ctx: &mut Ctx, options: &Args) {
    let filter = match options {
        [] => Filter::All,
        [filterby, kind, arg] if filterby.eq_ignore_ascii_case(b"filterby") => {
            match lossy(kind).to_ascii_lowercase().as_str() {
                "module" => Filter::Module,
                "aclcat" => Filter::Category(table::category(arg)),
                "pattern" => Filter::Pattern(arg),
                _ => return ctx.out.error("ERR syntax error"),
            }
        }
        _ => return ctx.out.error("ERR syntax error"),
    };
    let names = full_names(&filter);
    ctx.out.array(names.len());
    for name in names {
        ctx.out.bulk(name.as_bytes());
    }
}

/// Every command Tessera has and its subcommands, by full name, that pass `filter`.
fn full_names(filter: &Filter) -> Vec<&'static str> {
    let table = table::table();
    let mut names = Vec::new();
    for spec in super::global_registry().iter() {
        let Some(command) = table.lookup(spec.name.as_bytes()) else {
            // A command Redis does not have: only a pattern can name it.
            if matches!(filter, Filter::All) || passes(filter, spec.name, 0) {
                names.push(spec.name);
            }
            continue;
        };
        let family = std::iter::once(command).chain(
            command
                .subcommands
                .iter()
                .map(|&id| &table.commands[id])
                .filter(|sub| !NOT_BUILT.contains(&sub.full_name.as_str())),
        );
        for member in family {
            if passes(filter, &member.full_name, member.categories) {
                names.push(member.full_name.as_str());
            }
        }
    }
    names
}

fn passes(filter: &Filter, full_name: &str, categories: u32) -> bool {
    match filter {
        Filter::All => true,
        Filter::Module => false,
        Filter::Category(category) => category.is_some_and(|c| categories & (1 << c) != 0),
        Filter::Pattern(pattern) => crate::glob::glob_match(pattern, full_name.as_bytes(), true),
    }
}
