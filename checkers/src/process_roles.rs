//! What a process name says about its part in a run, read once per distinct process so that
//! detection passes compare syms, not strings.
//!
//! A worker is `wN`; its lock client library's tasks are named after it: renewal tasks
//! `wN:renew`, `wN:renew-1`, …, the ownership check `wN:check`, abandoned work `wN:late`, the
//! release of a lease granted after its worker stopped waiting `wN:give-back`.

use fencer_harness::{Sym, roles};

use crate::context::{Context, worker_of};
use crate::numbering::SymTable;

/// The part one process plays.
#[derive(Clone, Copy)]
pub(crate) struct Role {
    /// A worker itself (`w1`), not one of its tasks (`w1:renew`).
    pub is_worker: bool,
    /// A renewal task (`w1:renew`, `w1:renew-2`).
    pub is_renewal_task: bool,
    /// The library's ownership check (`w1:check`).
    pub is_check_task: bool,
    /// The worker the process belongs to, if some row holds that name (if none does, no
    /// worker of that name acted either).
    pub worker: Option<Sym>,
}

/// Roles of the processes seen so far.
pub(crate) struct Roles<'c, 'h> {
    ctx: &'c Context<'h>,
    by_process: SymTable<'c, Option<Role>>,
}

impl<'c, 'h> Roles<'c, 'h> {
    pub fn new(ctx: &'c Context<'h>) -> Roles<'c, 'h> {
        Roles {
            ctx,
            by_process: ctx.per_process(None),
        }
    }

    /// The role of `process` (a row's), read from its name on first use.
    pub fn of(&mut self, process: Sym) -> Role {
        let ctx = self.ctx;
        *self.by_process[process].get_or_insert_with(|| {
            let name = ctx.text(process);
            Role {
                is_worker: !name.contains(':'),
                is_renewal_task: roles::is_renewal_task(name),
                is_check_task: roles::is_check_task(name),
                worker: ctx.sym(worker_of(name)),
            }
        })
    }
}
