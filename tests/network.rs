//! Listening and admitting connections, against the real `tessera-server` binary with real
//! sockets: Redis 7's `bind` syntax, `tcp-backlog`, the open-files limit (maxclients
//! lowered to fit it, and a listener that keeps accepting when descriptors run out), and
//! protected mode checked from a network namespace the test creates.

mod common;

use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Redis 7.0.15's reply to a client refused by protected mode (networking.c), word for word.
const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected \
mode is enabled and no password is set for the default user. In this mode connections are \
only accepted from the loopback interface. If you want to connect from external computers \
to Redis you may adopt one of the following solutions: 1) Just disable protected mode \
sending the command 'CONFIG SET protected-mode no' from the loopback interface by \
connecting to Redis from the same host the server is running, however MAKE SURE Redis is \
not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change \
permanent. 2) Alternatively you can just disable the protected mode by editing the Redis \
configuration file, and setting the protected mode option to 'no', and then restarting \
the server. 3) If you started the server manually just for testing, restart it with the \
'--protected-mode no' option. 4) Setup a an authentication password for the default user. \
NOTE: You only need to do one of the above things in order for the server to start \
accepting connections from the outside.\r\n";

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Connects to `address` and sends PING; returns what came back within `wait`.
fn ping_at(address: &str, wait: Duration) -> Vec<u8> {
    let Ok(mut stream) = TcpStream::connect(address) else {
        return b"(connect failed)".to_vec();
    };
    if stream.write_all(b"PING\r\n").is_err() {
        return b"(write failed)".to_vec();
    }
    read_bytes(&mut stream, 7, wait).0
}

/// PING on fresh connections until one answers PONG, for up to `wait`.
fn pong_within(port: u16, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if ping_at(&format!("127.0.0.1:{port}"), Duration::from_millis(300)) == b"+PONG\r\n" {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).escape_debug().to_string()
}

/// Sends `request` on a raw connection and checks that exactly `expected` comes back.
fn expect_reply(stream: &mut TcpStream, request: &str, expected: &str) {
    stream.write_all(request.as_bytes()).unwrap();
    let (reply, _) = read_bytes(stream, expected.len(), Duration::from_secs(5));
    assert_eq!(
        show(&reply),
        show(expected.as_bytes()),
        "reply to {request:?}"
    );
}

fn info_stat(stream: &mut TcpStream, field: &str) -> Option<u64> {
    info_number(stream, "stats", field)
}

/// A number of INFO `section`.
fn info_number(stream: &mut TcpStream, section: &str, field: &str) -> Option<u64> {
    stream
        .write_all(format!("INFO {section}\r\n").as_bytes())
        .unwrap();
    let (reply, _) = read_bytes(stream, usize::MAX, Duration::from_millis(500));
    String::from_utf8_lossy(&reply).lines().find_map(|l| {
        l.strip_prefix(field)?
            .strip_prefix(':')?
            .trim()
            .parse()
            .ok()
    })
}

/// Where `name` is installed: on PATH, or in an sbin directory (often not on a user's PATH).
fn find_program(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(std::path::PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn ipv6_loopback_available() -> bool {
    std::net::TcpListener::bind("[::1]:0").is_ok()
}

// ---------------------------------------------------------------------------------------
// bind and tcp-backlog
// ---------------------------------------------------------------------------------------

#[test]
fn bind_star_and_optional_any_ipv6_listen_on_one_port() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--bind", "*", "-::*"]);
    let port = server.port;
    let log = server.log();
    assert!(
        log.contains(&format!("listening on 0.0.0.0:{port}")),
        "{log}"
    );
    assert_eq!(
        ping_at(&format!("127.0.0.1:{port}"), Duration::from_secs(5)),
        b"+PONG\r\n"
    );
    if ipv6_loopback_available() {
        // `::*` is every IPv6 address, on the same port as `*` (IPv6-only sockets).
        assert!(log.contains(&format!("listening on [::]:{port}")), "{log}");
        assert_eq!(
            ping_at(&format!("[::1]:{port}"), Duration::from_secs(5)),
            b"+PONG\r\n"
        );
    } else {
        let reason = "no IPv6 loopback (can't bind [::1])";
        skip(Capability::Ipv6, "the IPv6 listener", reason);
    }
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    expect_reply(
        &mut stream,
        "CONFIG GET bind\r\n",
        "*2\r\n$4\r\nbind\r\n$6\r\n* -::*\r\n",
    );
}

#[test]
fn a_required_address_that_cannot_be_bound_stops_start_up_with_redis_text() {
    let dir = temp_dir();
    // 192.0.2.0/24 is reserved for documentation: no interface has it.
    let Err(output) = try_start_server(dir.path(), &["--bind", "127.0.0.1", "192.0.2.1"]) else {
        panic!("the server started without its required address");
    };
    assert!(
        output.contains("Warning: Could not create server TCP listening socket 192.0.2.1:")
            && output.contains("bind: Cannot assign requested address"),
        "{output}"
    );
    assert!(output.contains("(TCP), aborting."), "{output}");
    // Optional, it is skipped.
    let server = start_server(dir.path(), &["--bind", "127.0.0.1", "-192.0.2.1"]);
    assert!(pong_within(server.port, Duration::from_secs(5)));
}

/// The listen backlog of the sockets listening on `port`, as `ss` reports it (Send-Q of
/// a listening socket), or None without `ss`.
fn listen_backlogs(port: u16) -> Option<Vec<u64>> {
    let output = Command::new(find_program("ss")?)
        .args(["-ltnH", &format!("sport = :{port}")])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    Some(
        text.lines()
            .filter_map(|line| line.split_whitespace().nth(2)?.parse().ok())
            .collect(),
    )
}

#[test]
fn tcp_backlog_is_what_listen_gets_and_a_capped_one_is_warned_about() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--tcp-backlog", "7"]);
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    expect_reply(
        &mut stream,
        "CONFIG GET tcp-backlog\r\n",
        "*2\r\n$11\r\ntcp-backlog\r\n$1\r\n7\r\n",
    );
    expect_reply(
        &mut stream,
        "CONFIG SET tcp-backlog 8\r\n",
        "-ERR CONFIG SET failed (possibly related to argument 'tcp-backlog') - can't set immutable config\r\n",
    );
    match listen_backlogs(server.port) {
        Some(backlogs) => {
            assert!(!backlogs.is_empty());
            assert!(backlogs.iter().all(|&b| b == 7), "backlogs {backlogs:?}");
        }
        None => skip(
            Capability::Privileged,
            "the backlog check",
            "`ss` (iproute2) is not installed",
        ),
    }
    assert!(!server.log().contains("TCP backlog"), "{}", server.log());

    let dir = temp_dir();
    let defaults = start_server(dir.path(), &[]);
    let mut stream = TcpStream::connect(("127.0.0.1", defaults.port)).unwrap();
    expect_reply(
        &mut stream,
        "CONFIG GET tcp-backlog\r\n",
        "*2\r\n$11\r\ntcp-backlog\r\n$3\r\n511\r\n",
    );

    // Above the kernel's cap: Redis's warning, word for word.
    let somaxconn: i64 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if somaxconn < i32::MAX as i64 {
        let asked = somaxconn + 1;
        let dir = temp_dir();
        let capped = start_server(dir.path(), &["--tcp-backlog", &asked.to_string()]);
        let log = capped.log();
        let warning = format!(
            "WARNING: The TCP backlog setting of {asked} cannot be enforced because /proc/sys/net/core/somaxconn is set to the lower value of {somaxconn}."
        );
        assert!(log.contains(&warning), "{log}");
        assert!(pong_within(capped.port, Duration::from_secs(5)));
    }
}

// ---------------------------------------------------------------------------------------
// The open-files limit
// ---------------------------------------------------------------------------------------

const CAP_SYS_RESOURCE: u32 = 24;

/// `pre_exec` body: soft = hard = `limit` descriptors, and no CAP_SYS_RESOURCE after exec
/// (a root test process could otherwise raise its hard limit again). Only async-signal-safe
/// system calls: this runs between fork and exec.
fn limit_open_files(limit: u64) -> std::io::Result<()> {
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let rlimit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: `rlimit` is a valid rlimit, only read by the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: plain integer arguments. Failure (no CAP_SETPCAP) is fine when the bounding
    // set lacks CAP_SYS_RESOURCE already; the test checks the outcome in the log.
    unsafe {
        libc::prctl(
            libc::PR_CAPBSET_DROP,
            CAP_SYS_RESOURCE as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: version 3 capget writes two CapData structs, which `data` holds.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } == 0 {
        let bit = !(1u32 << CAP_SYS_RESOURCE);
        data[0].effective &= bit;
        data[0].permitted &= bit;
        data[0].inheritable &= bit;
        // SAFETY: as above; capset only reads `header` and `data`.
        unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    }
    Ok(())
}

#[test]
fn a_low_open_files_limit_lowers_maxclients_and_clients_get_in_again_when_others_leave() {
    let dir = temp_dir();
    let server = try_start_server_with(dir.path(), &["--maxclients", "10000"], |command| {
        // SAFETY: the closure only makes async-signal-safe system calls.
        unsafe { command.pre_exec(|| limit_open_files(64)) };
    })
    .unwrap_or_else(|log| panic!("server failed to start:\n{log}"));
    let log = server.log();
    for line in [
        "You requested maxclients of 10000 requiring at least 10032 max file descriptors.",
        "Server can't set maximum open files to 10032 because of OS error: Operation not permitted.",
        "Current maximum open files is 64. maxclients has been reduced to 32 to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
    ] {
        assert!(log.contains(line), "the log lacks {line:?}:\n{log}");
    }
    let mut first = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    expect_reply(
        &mut first,
        "CONFIG GET maxclients\r\n",
        "*2\r\n$10\r\nmaxclients\r\n$2\r\n32\r\n",
    );
    // CONFIG SET cannot go past what the limit allows, as in Redis.
    expect_reply(
        &mut first,
        "CONFIG SET maxclients 100\r\n",
        "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with 32\r\n",
    );

    // Fill the server until a newcomer is turned away.
    let mut clients = vec![first];
    let refusal = loop {
        assert!(clients.len() <= 64, "no connection was ever refused");
        let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        stream.write_all(b"PING\r\n").unwrap();
        let (reply, _) = read_bytes(&mut stream, 7, Duration::from_secs(2));
        if reply != b"+PONG\r\n" {
            let (rest, closed) = read_bytes(&mut stream, usize::MAX, Duration::from_secs(2));
            break ([reply, rest].concat(), closed);
        }
        clients.push(stream);
    };
    assert_eq!(clients.len(), 32, "maxclients is 32");
    assert_eq!(
        show(&refusal.0),
        show(b"-ERR max number of clients reached\r\n")
    );
    assert!(refusal.1, "a refused client is closed");
    assert_eq!(info_stat(&mut clients[0], "rejected_connections"), Some(1));
    // Everyone leaves; a newcomer is served.
    clients.clear();
    assert!(
        pong_within(server.port, Duration::from_secs(5)),
        "no new connection was served after the clients left"
    );
}

/// The soft and hard open-files limits of process `pid` (/proc/<pid>/limits).
fn open_files_limits(pid: u32) -> (String, String) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut words = line.split_whitespace().skip(3);
    (
        words.next().unwrap().to_string(),
        words.next().unwrap().to_string(),
    )
}

#[test]
fn the_open_files_limit_is_raised_to_maxclients_plus_32_keeping_the_hard_limit() {
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `own` is a valid, writable rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut own) }, 0);
    if own.rlim_max < 1032 {
        return skip(
            Capability::Privileged,
            WHOLE_TEST,
            "the hard open-files limit is below 1032 (raising it needs root)",
        );
    }
    let dir = temp_dir();
    let hard = own.rlim_max;
    let server = try_start_server_with(dir.path(), &["--maxclients", "1000"], move |command| {
        let limit = libc::rlimit {
            rlim_cur: 256,
            rlim_max: hard,
        };
        // SAFETY: setrlimit is async-signal-safe; `limit` is a valid rlimit.
        unsafe {
            command.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
    })
    .unwrap_or_else(|log| panic!("server failed to start:\n{log}"));
    let log = server.log();
    assert!(
        log.contains(
            "Increased maximum number of open files to 1032 (it was originally set to 256)."
        ),
        "{log}"
    );
    let (soft, hard_now) = open_files_limits(server.pid());
    assert_eq!(soft, "1032");
    let expected_hard = if hard == libc::RLIM_INFINITY {
        "unlimited".to_string()
    } else {
        hard.to_string()
    };
    assert_eq!(hard_now, expected_hard, "the hard limit is kept");
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    expect_reply(
        &mut stream,
        "CONFIG GET maxclients\r\n",
        "*2\r\n$10\r\nmaxclients\r\n$4\r\n1000\r\n",
    );
    // A higher maxclients raises the soft limit again (the hard limit allows it).
    if hard >= 2032 {
        expect_reply(&mut stream, "CONFIG SET maxclients 2000\r\n", "+OK\r\n");
        assert_eq!(open_files_limits(server.pid()).0, "2032");
    }
}

fn open_descriptors(pid: u32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Sets another process's soft open-files limit (prlimit(2); allowed for a process of the
/// same user).
fn set_soft_open_files_limit(pid: u32, soft: u64) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new limit only reads the current one into `old`.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            std::ptr::null(),
            &mut old,
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: old.rlim_max,
    };
    // SAFETY: `new` is a valid rlimit, only read; the old value is not wanted.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &new,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Opens connections until one is refused; returns the served ones and the refusal (its
/// bytes and whether it was closed).
fn fill(port: u16, most: usize) -> (Vec<TcpStream>, Vec<u8>, bool) {
    let mut served = Vec::new();
    for _ in 0..most {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _ = stream.write_all(b"PING\r\n");
        let (reply, closed) = read_bytes(&mut stream, 7, Duration::from_secs(2));
        if reply != b"+PONG\r\n" {
            let (rest, closed_later) = read_bytes(&mut stream, usize::MAX, Duration::from_secs(2));
            return (served, [reply, rest].concat(), closed || closed_later);
        }
        served.push(stream);
    }
    panic!("{most} connections and none refused");
}

#[test]
fn running_out_of_descriptors_refuses_newcomers_and_never_wedges_the_listener() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut watcher = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    expect_reply(&mut watcher, "PING\r\n", "+PONG\r\n");
    // Room for a few more descriptors only (maxclients stays 10000): accept(2) itself
    // fails with EMFILE.
    let open = open_descriptors(server.pid());
    let mut soft = 0;
    let mut free = 0;
    while free < 4 {
        if !open.contains(&soft) {
            free += 1;
        }
        soft += 1;
    }
    set_soft_open_files_limit(server.pid(), soft);
    for round in 0..2 {
        let (served, refusal, closed) = fill(server.port, 40);
        assert!(!served.is_empty(), "round {round}: nobody was served");
        assert_eq!(
            show(&refusal),
            show(b"-ERR max number of clients reached\r\n"),
            "round {round}"
        );
        assert!(closed, "round {round}: the refused client is closed");
        // The rest are refused the same way, at once.
        for _ in 0..3 {
            let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            let (reply, closed) = read_bytes(&mut stream, usize::MAX, Duration::from_secs(2));
            assert_eq!(
                show(&reply),
                show(b"-ERR max number of clients reached\r\n")
            );
            assert!(closed);
        }
        assert_eq!(
            info_stat(&mut watcher, "rejected_connections"),
            Some(4 * (round + 1))
        );
        drop(served);
        assert!(
            pong_within(server.port, Duration::from_secs(5)),
            "round {round}: no connection was served after the clients left"
        );
    }
    let log = server.log();
    assert!(
        log.contains("Accepting client connection: Too many open files"),
        "{log}"
    );
}

/// Closes `stream` with a reset (SO_LINGER 0) instead of a FIN.
fn reset(stream: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is open (owned by `stream`) and `linger` is the option's
    // type, passed with its size.
    let set = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "SO_LINGER");
}

/// CVE-2025-48367: Redis's accept loop returned on a connection that failed while it was
/// accepted, leaving the others waiting. Connections reset in the backlog (while the
/// server sleeps in DEBUG SLEEP) are passed over: every good client queued among them is
/// served, and none of the reset ones stays counted.
#[test]
fn connections_reset_before_they_are_accepted_leave_the_listener_serving() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--enable-debug-command", "yes"]);
    let mut sleeper = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    expect_reply(&mut sleeper, "PING\r\n", "+PONG\r\n");
    sleeper.write_all(b"DEBUG SLEEP 1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut good = Vec::new();
    for round in 0..20 {
        for _ in 0..10 {
            reset(TcpStream::connect(("127.0.0.1", server.port)).unwrap());
        }
        if round % 4 == 0 {
            let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            stream.write_all(b"PING\r\n").unwrap();
            good.push(stream);
        }
    }
    let (reply, _) = read_bytes(&mut sleeper, 5, Duration::from_secs(10));
    assert_eq!(show(&reply), show(b"+OK\r\n"), "DEBUG SLEEP");
    for (i, stream) in good.iter_mut().enumerate() {
        let (reply, closed) = read_bytes(stream, 7, Duration::from_secs(5));
        assert_eq!(show(&reply), show(b"+PONG\r\n"), "good client {i}");
        assert!(!closed, "good client {i}");
    }
    // The sleeper and the five good clients; the 200 reset ones are gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let connected = info_number(&mut sleeper, "clients", "connected_clients");
        if connected == Some(1 + good.len() as u64) {
            break;
        }
        assert!(Instant::now() < deadline, "connected_clients {connected:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------
// Protected mode, from another network namespace
// ---------------------------------------------------------------------------------------

/// A network namespace joined to this one by a veth pair, removed on drop (also when the
/// test fails). The server runs here; clients run inside with `ip netns exec`.
struct Netns {
    name: String,
    host_link: String,
    /// The `ip` program.
    ip: std::path::PathBuf,
    /// Run `ip` through `sudo -n` (not root, passwordless sudo).
    sudo: bool,
    /// The address of this side, which clients in the namespace connect to.
    host_ip: String,
    /// The clients' source address.
    inside_ip: String,
}

impl Netns {
    /// Creates one, or says why not (then the caller skips).
    fn create() -> Result<Netns, String> {
        let ip = find_program("ip").ok_or("`ip` is not installed (apt install iproute2)")?;
        for tool in ["bash", "timeout"] {
            if find_program(tool).is_none() {
                return Err(format!("`{tool}` is not installed"));
            }
        }
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let sudo = !root;
        if sudo
            && !Command::new("sudo")
                .args(["-n", "true"])
                .output()
                .is_ok_and(|o| o.status.success())
        {
            return Err(
                "not root and no passwordless sudo: can't create a network namespace".into(),
            );
        }
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid = std::process::id();
        // 198.18.0.0/15 is reserved for network tests; one /30 per (process, namespace).
        let slot = (pid % 16000) * 4 + n;
        let (third, fourth) = ((slot / 64) % 256, (slot % 64) * 4);
        let second = 18 + (slot / (64 * 256)) % 2;
        let netns = Netns {
            name: format!("tessera-test-{pid}-{n}"),
            host_link: format!("tsh{}", pid % 1_000_000 * 10 + n),
            ip,
            sudo,
            host_ip: format!("198.{second}.{third}.{}", fourth + 1),
            inside_ip: format!("198.{second}.{third}.{}", fourth + 2),
        };
        let inside_link = format!("tsi{}", pid % 1_000_000 * 10 + n);
        let steps: Vec<Vec<String>> = vec![
            vec!["netns", "add", &netns.name],
            vec![
                "link",
                "add",
                &netns.host_link,
                "type",
                "veth",
                "peer",
                "name",
                &inside_link,
            ],
            vec!["link", "set", &inside_link, "netns", &netns.name],
            vec![
                "addr",
                "add",
                &format!("{}/30", netns.host_ip),
                "dev",
                &netns.host_link,
            ],
            vec!["link", "set", &netns.host_link, "up"],
            vec![
                "-n",
                &netns.name,
                "addr",
                "add",
                &format!("{}/30", netns.inside_ip),
                "dev",
                &inside_link,
            ],
            vec!["-n", &netns.name, "link", "set", &inside_link, "up"],
            vec!["-n", &netns.name, "link", "set", "lo", "up"],
        ]
        .into_iter()
        .map(|step| step.into_iter().map(str::to_string).collect())
        .collect();
        for step in steps {
            let output = netns.ip(&step)?;
            if !output.status.success() {
                // `netns` drops here and removes what was made.
                return Err(format!(
                    "`ip {}` failed: {}",
                    step.join(" "),
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
        }
        Ok(netns)
    }

    fn ip(&self, args: &[String]) -> Result<Output, String> {
        let mut command = if self.sudo {
            let mut c = Command::new("sudo");
            c.arg("-n").arg(&self.ip);
            c
        } else {
            Command::new(&self.ip)
        };
        command
            .args(args)
            .output()
            .map_err(|e| format!("can't run ip: {e}"))
    }

    /// Runs `program args` inside the namespace (for at most 10 seconds).
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let mut all: Vec<String> = ["netns", "exec", &self.name, "timeout", "10", program]
            .iter()
            .map(|s| s.to_string())
            .collect();
        all.extend(args.iter().map(|s| s.to_string()));
        self.ip(&all).unwrap()
    }

    /// From inside: connects to the host side's `port`, writes `request` (printf escapes)
    /// and returns every byte the server sends until it closes the connection.
    fn exchange(&self, port: u16, request: &str) -> Vec<u8> {
        let script = format!(
            "exec 3<>/dev/tcp/{}/{port} && printf '{request}' >&3 && cat <&3",
            self.host_ip
        );
        self.run("bash", &["-c", &script]).stdout
    }

    /// `exchange`, checking that exactly `expected` comes back.
    fn expect(&self, port: u16, request: &str, expected: &[u8]) {
        assert_eq!(
            show(&self.exchange(port, request)),
            show(expected),
            "{request:?} from {} to port {port}",
            self.inside_ip
        );
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = self.ip(&["netns".into(), "del".into(), self.name.clone()]);
        let _ = self.ip(&["link".into(), "del".into(), self.host_link.clone()]);
    }
}

#[test]
fn protected_mode_refuses_outside_clients_whatever_bind_says() {
    let netns = match Netns::create() {
        Ok(netns) => netns,
        Err(why) => return skip(Capability::Privileged, WHOLE_TEST, &why),
    };

    // Every IPv4 address, protected mode on (the default), no password.
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--bind", "*"]);
    // The outside client gets Redis's text and is closed, without sending anything.
    netns.expect(server.port, "", DENIED);
    // Loopback clients are served.
    let mut local = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    expect_reply(&mut local, "PING\r\n", "+PONG\r\n");
    assert_eq!(info_stat(&mut local, "rejected_connections"), Some(1));
    assert_eq!(info_stat(&mut local, "total_connections_received"), Some(1));
    // A password for the default user lets the outside in (with AUTH).
    expect_reply(&mut local, "CONFIG SET requirepass s3cret\r\n", "+OK\r\n");
    netns.expect(
        server.port,
        "AUTH s3cret\\r\\nPING\\r\\nQUIT\\r\\n",
        b"+OK\r\n+PONG\r\n+OK\r\n",
    );
    // So does turning protected mode off.
    let mut local = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    expect_reply(&mut local, "AUTH s3cret\r\n", "+OK\r\n");
    expect_reply(
        &mut local,
        "CONFIG SET requirepass \"\" protected-mode no\r\n",
        "+OK\r\n",
    );
    netns.expect(server.port, "PING\\r\\nQUIT\\r\\n", b"+PONG\r\n+OK\r\n");
    drop(server);

    // Real Redis 7.0 does the same.
    if let Some(binary) = require_redis_or_skip("the comparison with Redis") {
        let data = temp_dir();
        let oracle = RedisOracle::start_with(&binary, data.path(), &["--bind", "*"]);
        netns.expect(oracle.port, "", DENIED);
    }

    // Bound to the one address the outside reaches, and loopback: still refused.
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--bind", &netns.host_ip, "127.0.0.1"]);
    netns.expect(server.port, "", DENIED);
    drop(server);

    // Started with protected mode off, or with a password: served; a real client too.
    let dir = temp_dir();
    let server = start_server(
        dir.path(),
        &["--bind", &netns.host_ip, "--protected-mode", "no"],
    );
    if find_program("redis-cli").is_some() {
        let output = netns.run(
            "redis-cli",
            &["-h", &netns.host_ip, "-p", &server.port.to_string(), "PING"],
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "PONG");
    } else {
        let reason = "redis-cli is not installed (scripts/test installs it)";
        skip(Capability::Redis, "the check with redis-cli", reason);
    }
    netns.expect(server.port, "PING\\r\\nQUIT\\r\\n", b"+PONG\r\n+OK\r\n");
    drop(server);
    let dir = temp_dir();
    let server = start_server(
        dir.path(),
        &["--bind", &netns.host_ip, "--requirepass", "pw"],
    );
    netns.expect(
        server.port,
        "PING\\r\\nAUTH pw\\r\\nPING\\r\\nQUIT\\r\\n",
        b"-NOAUTH Authentication required.\r\n+OK\r\n+PONG\r\n+OK\r\n",
    );
    // The peer really is the namespace's address, not loopback.
    let reply = netns.exchange(server.port, "AUTH pw\\r\\nCLIENT INFO\\r\\nQUIT\\r\\n");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.contains(&format!(" addr={}:", netns.inside_ip)),
        "{reply}"
    );
}
