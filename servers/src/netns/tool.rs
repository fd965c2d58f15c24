//! Running `ip` and `iptables-restore`, with errors that say which Debian package to install
//! or which privilege is missing, instead of a bare exit status.

use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::ServerError;

/// A program a lab needs, and the Debian package that provides it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Tool {
    /// `ip` (namespaces, links, addresses).
    Ip,
    /// `iptables-restore` (the partition rules, one atomic chain rewrite per namespace).
    IptablesRestore,
}

impl Tool {
    fn program(self) -> &'static str {
        match self {
            Tool::Ip => "ip",
            Tool::IptablesRestore => "iptables-restore",
        }
    }

    fn package(self) -> &'static str {
        match self {
            Tool::Ip => "iproute2",
            Tool::IptablesRestore => "iptables",
        }
    }

    /// Fails unless the program is on `PATH`: a missing tool is a clear message up front, not a
    /// half-built lab.
    pub(super) fn require(self) -> Result<(), ServerError> {
        let found = std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|dir| dir.join(self.program()).is_file())
        });
        if found { Ok(()) } else { Err(self.missing()) }
    }

    fn missing(self) -> ServerError {
        ServerError::NotInstalled(format!(
            "`{}` is not on PATH: network namespaces for a cluster need the Debian package {}",
            self.program(),
            self.package()
        ))
    }
}

/// Runs `ip ARGS` and returns what it printed.
pub(super) fn ip(args: &[&str]) -> Result<String, ServerError> {
    run(Tool::Ip, Command::new("ip").args(args), args, None)
}

/// Feeds `script` to `iptables-restore --noflush` inside the namespace `namespace`: only the
/// chains the script declares are rewritten, each atomically.
pub(super) fn iptables_restore(namespace: &str, script: &str) -> Result<(), ServerError> {
    let args = ["netns", "exec", namespace, "iptables-restore", "--noflush"];
    run(
        Tool::IptablesRestore,
        Command::new("ip").args(args),
        &args,
        Some(script),
    )
    .map(drop)
}

fn run(
    tool: Tool,
    command: &mut Command,
    args: &[&str],
    input: Option<&str>,
) -> Result<String, ServerError> {
    let shown = format!("ip {}", args.join(" "));
    let mut child = command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => Tool::Ip.missing(),
            _ => ServerError::Failed(format!("cannot run `{shown}`: {error}")),
        })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|error| ServerError::Failed(format!("`{shown}`: writing input: {error}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|error| ServerError::Failed(format!("`{shown}`: {error}")))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    // `ip netns exec` reports a program it cannot find this way, with its own exit status.
    if stderr.contains("exec of") && stderr.contains("No such file") {
        return Err(tool.missing());
    }
    let hint = if stderr.contains("Operation not permitted") || stderr.contains("Permission denied")
    {
        "; network namespaces and firewall rules need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    } else {
        ""
    };
    Err(ServerError::Failed(format!(
        "`{shown}` failed ({}): {stderr}{hint}",
        output.status
    )))
}
