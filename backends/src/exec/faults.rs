//! An exec child as a target of the real tier's server faults: `server-pause` is SIGSTOP and
//! SIGCONT of its process group, `restart` kills the group and starts the command again. A
//! pipe has no proxy to partition, delay or cut, and the child's clock is the machine's, so
//! every other server fault is refused before the run.

use fencer_nemesis::{Fault, ServerAction, ServerFaults};

use super::connection::ExecConnection;

/// Why an exec child cannot take `fault` (aimed at it), or `None` if it can.
pub fn refusal(fault: &Fault) -> Option<String> {
    match fault {
        Fault::ServerPause { .. } | Fault::Restart { .. } => None,
        other => Some(format!(
            "`{}` at {} ns aims at the {} exec child, which takes only server-pause and \
             restart (its pipes have no proxy to fault, and its clock is the machine's)",
            other.kind().name(),
            other.at_ns(),
            other.target()
        )),
    }
}

#[async_trait::async_trait]
impl ServerFaults for ExecConnection {
    async fn apply(&self, action: ServerAction) -> Result<(), String> {
        // Faults may overlap: a pause or resume that finds no child running (a restart is
        // under way, or it ended) has nothing to freeze or thaw.
        match action {
            ServerAction::Pause => self.pause().await,
            ServerAction::Resume => self.resume().await,
            ServerAction::Kill => {
                if let Some(child) = self.current().await {
                    let why = format!("{} was killed by a restart fault", child.label());
                    child.kill(why).await;
                }
                Ok(())
            }
            ServerAction::Start => self.restart().await,
            other => Err(format!(
                "{} takes only pauses and restarts, not {other:?}",
                self.shown()
            )),
        }
    }
}
