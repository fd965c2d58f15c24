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
        if on_path(self.program()) {
            Ok(())
        } else {
            Err(self.missing())
        }
    }

    fn missing(self) -> ServerError {
        ServerError::NotInstalled(format!(
            "`{}` is not on PATH: network namespaces for a cluster need the Debian package {}",
            self.program(),
            self.package()
        ))
    }
}

/// Linux capability bits a lab needs: `CAP_NET_ADMIN` (links, addresses, firewall rules) and
/// `CAP_SYS_ADMIN` (mounting and entering namespaces).
const NEEDED_CAPABILITIES: [(u32, &str); 2] = [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")];

/// Fails unless this process holds the capabilities a lab needs, naming the missing ones, so a
/// user without root learns it before anything is half made.
pub(super) fn require_privileges() -> Result<(), ServerError> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let missing = missing_capabilities(&status);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ServerError::Failed(format!(
            "network namespaces and firewall rules need root: this process lacks {}",
            missing.join(" and ")
        )))
    }
}

/// The needed capabilities absent from the effective set in `status` (`/proc/self/status`).
fn missing_capabilities(status: &str) -> Vec<&'static str> {
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    NEEDED_CAPABILITIES
        .iter()
        .filter(|(bit, _)| effective & (1 << bit) == 0)
        .map(|(_, name)| *name)
        .collect()
}

/// Whether `program` is an executable file in one of `PATH`'s directories.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
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
    Err(ServerError::Failed(format!(
        "`{shown}` failed ({}): {stderr}{}",
        output.status,
        failure_hint(&stderr)
    )))
}

/// What to do about a failure `ip` or `iptables` reported on stderr, when it is a known one.
fn failure_hint(stderr: &str) -> &'static str {
    if stderr.contains("Operation not permitted") || stderr.contains("Permission denied") {
        "; network namespaces and firewall rules need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_names_its_debian_package() {
        let ip = Tool::Ip.missing().to_string();
        assert!(ip.contains("`ip`") && ip.contains("iproute2"), "{ip}");
        let iptables = Tool::IptablesRestore.missing().to_string();
        assert!(iptables.contains("package iptables"), "{iptables}");
        assert!(!on_path("fencer-no-such-program"));
        assert!(on_path("sh"));
    }

    #[test]
    fn capabilities_are_read_from_the_effective_set() {
        let root = "Name:\tx\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n";
        assert!(missing_capabilities(root).is_empty());
        let nobody = "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";
        assert_eq!(
            missing_capabilities(nobody),
            ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]
        );
        let net_only = "CapEff:\t0000000000001000\n";
        assert_eq!(missing_capabilities(net_only), ["CAP_SYS_ADMIN"]);
    }

    #[test]
    fn a_refused_privilege_says_root_is_needed() {
        let hint = failure_hint("mount --make-shared /run/netns failed: Operation not permitted");
        assert!(hint.contains("need root"), "{hint}");
        assert_eq!(failure_hint("Cannot find device \"fb1.0\""), "");
    }
}
