//! An exec child as a target of the real tier's server faults: `server-pause` is SIGSTOP and
//! SIGCONT of its process group, `restart` kills the group and starts the command again. A
//! pipe has no proxy to partition, delay or cut, and the child's clock is the machine's, so
//! every other server fault is refused before the run ([`crate::registry::exec_refusal`]).

use fencer_nemesis::{FaultFailed, ServerAction, ServerFaults};

use super::connection::ExecConnection;

#[async_trait::async_trait]
impl ServerFaults for ExecConnection {
    async fn apply(&self, action: ServerAction) -> Result<(), FaultFailed> {
        // Faults may overlap: a pause or resume that finds no child running (a restart is
        // under way, or it ended) has nothing to freeze or thaw.
        let done = match action {
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
            other => {
                return Err(FaultFailed(format!(
                    "{} takes only pauses and restarts, not {other:?}",
                    self.shown()
                )));
            }
        };
        done.map_err(|error| FaultFailed(error.to_string()))
    }
}
