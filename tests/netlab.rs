//! The network substrate of fencer's clusters: a [`NetLab`] gives each member a namespace of its
//! own on one bridge. Members and fencer's process reach each other; a partition cuts exactly
//! the links between groups, both ways, and a heal restores them; dropping the lab leaves no
//! process, namespace, interface or claim behind, and a lab whose process was killed is swept by
//! the next one. Each member runs a private `redis-server` as something to connect to.

mod support;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use fencer_servers::{Launch, NetLab, ServerError, ServerGuard};

/// The port every member's Redis listens on (each namespace has its own ports).
const PORT: u16 = 6379;

/// Set in the child process that makes a lab and is then killed, for the sweep test.
const ORPHAN_ENV: &str = "FENCER_NETLAB_ORPHAN";

/// A lab of `members`, or `None` after the skip line.
fn lab_or_skipped(test: &str, members: &[&str]) -> Option<NetLab> {
    support::started_or_skipped(
        test,
        "network namespaces",
        "iproute2 and iptables (and run as root)",
        NetLab::new(members),
    )
}

/// A Redis in `member`'s namespace, listening on its lab address.
fn redis_in(lab: &NetLab, member: &str) -> Result<ServerGuard, ServerError> {
    let address = lab.address(member)?;
    let dir = tempfile::tempdir().map_err(|error| ServerError::Failed(error.to_string()))?;
    let launch = Launch::new("redis-server")
        .args(["--port", &PORT.to_string(), "--bind", &address.to_string()])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .log_to(dir.path().join("server.log"));
    let launch = lab.launch_in(member, launch)?;
    ServerGuard::start_at(
        "redis-server",
        launch,
        SocketAddr::from((address, PORT)),
        dir,
        None,
    )
}

/// Whether a TCP connection from `from`'s namespace to `to`'s Redis opens within 700 ms.
fn connects(lab: &NetLab, from: &str, to: &str) -> bool {
    let target = format!("exec 3<>/dev/tcp/{}/{PORT}", lab.address(to).unwrap());
    Command::new("ip")
        .args(["netns", "exec", &lab.namespace(from).unwrap()])
        .args(["timeout", "0.7", "bash", "-c", &target])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// What `command` prints.
fn output(command: &[&str]) -> String {
    let out = Command::new(command[0])
        .args(&command[1..])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The names of `lab`'s namespaces and interfaces that the system still lists.
fn remaining(namespaces: &[String], links: &[String]) -> Vec<String> {
    let listed_namespaces = output(&["ip", "netns", "list"]);
    let listed_links = output(&["ip", "-o", "link", "show"]);
    let namespace_names: Vec<&str> = listed_namespaces
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    let link_names: Vec<&str> = listed_links
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .map(|name| name.trim_end_matches(':').split('@').next().unwrap())
        .collect();
    namespaces
        .iter()
        .filter(|name| namespace_names.contains(&name.as_str()))
        .chain(
            links
                .iter()
                .filter(|name| link_names.contains(&name.as_str())),
        )
        .cloned()
        .collect()
}

/// The claim files under `/run/fencer-netlab` that point at `owner`.
fn claims_of(owner: &str) -> Vec<String> {
    std::fs::read_dir("/run/fencer-netlab")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path()).is_ok_and(|target| target.to_str() == Some(owner))
        })
        .map(|entry| entry.path().display().to_string())
        .collect()
}

#[test]
fn members_reach_each_other_and_partitions_cut_exactly_the_links_between_groups() {
    let Some(lab) = lab_or_skipped("netlab_partition", &["n1", "n2", "n3"]) else {
        return;
    };
    let mut servers = Vec::new();
    for member in ["n1", "n2", "n3"] {
        // Each start waited for fencer's process to connect to the member's lab address.
        let started = redis_in(&lab, member);
        let Some(server) = support::started_or_skipped(
            "netlab_partition",
            "a private redis-server",
            "redis-server",
            started,
        ) else {
            return;
        };
        servers.push(server);
    }
    // `ip netns exec` execs in place: the guard's pid is the server, inside the member's namespace.
    let pid = servers[0].pid().unwrap();
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap()
            .trim(),
        "redis-server"
    );
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    let its = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_ne!(own, its, "the server runs in a namespace of its own");
    assert!(connects(&lab, "n1", "n2") && connects(&lab, "n3", "n1"));

    let group = |names: &[&str]| {
        names
            .iter()
            .map(|name| name.to_string())
            .collect::<Vec<_>>()
    };
    lab.partition(&[group(&["n1"]), group(&["n2", "n3"])])
        .unwrap();
    assert!(!connects(&lab, "n1", "n2"), "n1 → n2 is cut");
    assert!(!connects(&lab, "n3", "n1"), "n3 → n1 is cut");
    assert!(connects(&lab, "n2", "n3"), "links inside a group stay");
    // fencer's process still reaches the isolated member.
    assert!(
        std::net::TcpStream::connect_timeout(&servers[0].address(), Duration::from_secs(1)).is_ok()
    );

    // A new partition replaces the old one.
    lab.partition(&[group(&["n1", "n2"]), group(&["n3"])])
        .unwrap();
    assert!(connects(&lab, "n1", "n2"), "the old cut is gone");
    assert!(!connects(&lab, "n2", "n3"), "the new cut is in place");

    lab.heal().unwrap();
    assert!(connects(&lab, "n1", "n3") && connects(&lab, "n3", "n2"));
    let refused = lab.partition(&[group(&["n1", "n9"])]).unwrap_err();
    assert!(
        refused.to_string().contains("`n9`, which is no member"),
        "{refused}"
    );
}

#[test]
fn dropping_a_lab_leaves_no_process_namespace_interface_or_claim() {
    let Some(lab) = lab_or_skipped("netlab_teardown", &["n1", "n2"]) else {
        return;
    };
    let (namespaces, links, owner) = (lab.namespaces(), lab.links(), lab.name());
    let made = namespaces.len() + links.len();
    assert_eq!(
        remaining(&namespaces, &links).len(),
        made,
        "{namespaces:?} {links:?}"
    );
    assert_eq!(claims_of(&owner).len(), 1);
    // A process the lab's owner lost track of: the lab kills it on drop.
    let mut stray = Command::new("ip")
        .args(["netns", "exec", &namespaces[1], "sleep", "60"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(lab);
    let status = stray.wait().unwrap();
    assert!(!status.success(), "the stray process was killed: {status}");
    assert_eq!(remaining(&namespaces, &links), Vec::<String>::new());
    assert_eq!(claims_of(&owner), Vec::<String>::new());
}

#[test]
fn a_lab_left_by_a_killed_process_is_swept_by_the_next_lab() {
    if std::env::var_os(ORPHAN_ENV).is_some() {
        // The child: make a lab, say its names, and wait to be killed.
        let lab = NetLab::new(&["n1", "n2"]).unwrap();
        println!(
            "LAB {} {} {}",
            lab.name(),
            lab.namespaces().join(","),
            lab.links().join(",")
        );
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let Some(probe) = lab_or_skipped("netlab_sweep", &["n1"]) else {
        return;
    };
    drop(probe);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_lab_left_by_a_killed_process_is_swept_by_the_next_lab",
            "--nocapture",
        ])
        .env(ORPHAN_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    {
        use std::io::BufRead as _;
        let mut reader = std::io::BufReader::new(child.stdout.as_mut().unwrap());
        while !line.starts_with("LAB ") {
            line.clear();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "the child made no lab"
            );
        }
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let owner = words[1].to_string();
    let namespaces: Vec<String> = words[2].split(',').map(str::to_string).collect();
    let links: Vec<String> = words[3].split(',').map(str::to_string).collect();
    // SIGKILL: no Drop runs, everything stays behind.
    child.kill().unwrap();
    child.wait().unwrap();
    let left = namespaces.len() + links.len();
    assert_eq!(remaining(&namespaces, &links).len(), left);
    assert_eq!(claims_of(&owner).len(), 1);

    let next = NetLab::new(&["n1"]).unwrap();
    assert_eq!(remaining(&namespaces, &links), Vec::<String>::new());
    assert_eq!(claims_of(&owner), Vec::<String>::new());
    drop(next);
}
