//! Listening sockets and the admission of new connections.
//!
//! - `listen`: Redis 7's `bind` syntax (`*` every IPv4 address, `::*` every IPv6 address,
//!   a leading `-` for an address that may be missing), IPv6 sockets limited to IPv6 so
//!   that `*` and `::*` share a port, the `tcp-backlog` given to listen(2), and Redis's
//!   warning when `/proc/sys/net/core/somaxconn` caps it.
//! - `Listeners::accept`: accepting never stops for good. When the process runs out of
//!   descriptors (EMFILE, ENFILE) a spare descriptor is closed, the waiting connection is
//!   accepted on it, told the server is full and closed, and the spare is reopened; so the
//!   edge-triggered listener is drained and the next connection raises a new event. Any
//!   failure that leaves connections waiting asks the loop's timer to try again.
//! - `protected_mode_denies`: Redis 7.0's protected mode, whatever `bind` says.
//! - `unix`: the Unix socket of `unixsocket`, created with `unixsocketperm`.
//! - `stream`: a client's socket and its address, whichever listener it came through.

/// `mio::event::Source` for an enum of sockets, through its `source()` (the variant's
/// socket): registering a `Stream` or a `Listener` registers the socket inside.
macro_rules! source_through {
    ($type:ty) => {
        impl mio::event::Source for $type {
            fn register(
                &mut self,
                registry: &mio::Registry,
                token: mio::Token,
                interests: mio::Interest,
            ) -> std::io::Result<()> {
                self.source().register(registry, token, interests)
            }

            fn reregister(
                &mut self,
                registry: &mio::Registry,
                token: mio::Token,
                interests: mio::Interest,
            ) -> std::io::Result<()> {
                self.source().reregister(registry, token, interests)
            }

            fn deregister(&mut self, registry: &mio::Registry) -> std::io::Result<()> {
                self.source().deregister(registry)
            }
        }
    };
}

mod stream;
mod unix;

pub use stream::{Peer, Stream};
pub use unix::UnixSocketError;

use crate::config::Config;
use crate::process::os_error_text;
use mio::event::Source;
use mio::net::{TcpListener, UnixListener};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// What a client is told when the server cannot take it (Redis's text).
pub const MAX_CLIENTS_REACHED: &[u8] = b"-ERR max number of clients reached\r\n";

/// Redis 7.0's reply to a client refused by protected mode, word for word.
pub const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected \
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

/// Where the kernel's cap on listen backlogs is published.
const SOMAXCONN_PATH: &str = "/proc/sys/net/core/somaxconn";

/// With `port 0`, how many times binding starts over on a new port when a later address
/// finds the port the first one got already taken.
const PORT_ZERO_ATTEMPTS: usize = 16;

/// Why the server cannot listen.
#[derive(Debug)]
pub enum ListenError {
    /// `bind ""` and no `unixsocket`.
    Nowhere,
    /// An address that is not optional could not be bound (the reason is logged).
    Failed { port: u16 },
    /// The Unix socket could not be opened.
    Unix(UnixSocketError),
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Redis's words (its test suite matches the TCP one).
        match self {
            ListenError::Nowhere => write!(f, "Configured to not listen anywhere, exiting."),
            ListenError::Failed { port } => {
                write!(f, "Failed listening on port {port} (TCP), aborting.")
            }
            ListenError::Unix(reason) => write!(f, "Failed opening Unix socket: {reason}"),
        }
    }
}

impl std::error::Error for ListenError {}

/// One failed step of opening a listening socket, shown as Redis shows it ("bind: ...").
#[derive(Debug)]
struct SocketError {
    step: &'static str,
    source: io::Error,
}

impl std::fmt::Display for SocketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.step, os_error_text(&self.source))
    }
}

impl SocketError {
    fn at(step: &'static str) -> impl FnOnce(io::Error) -> SocketError {
        move |source| SocketError { step, source }
    }

    /// Failures that mean "this machine has no such address family": skipped, as Redis
    /// skips them, whether the address is optional or not.
    fn unsupported_family(&self) -> bool {
        matches!(
            self.source.raw_os_error(),
            Some(
                libc::ENOPROTOOPT
                    | libc::EPROTONOSUPPORT
                    | libc::ESOCKTNOSUPPORT
                    | libc::EPFNOSUPPORT
                    | libc::EAFNOSUPPORT
            )
        )
    }

    fn address_not_available(&self) -> bool {
        self.source.raw_os_error() == Some(libc::EADDRNOTAVAIL)
    }

    fn address_in_use(&self) -> bool {
        self.source.kind() == ErrorKind::AddrInUse
    }
}

/// One word of the `bind` directive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindAddress {
    /// As written, without the leading `-`.
    pub text: String,
    pub optional: bool,
}

impl BindAddress {
    pub fn parse(word: &str) -> BindAddress {
        match word.strip_prefix('-') {
            Some(rest) => BindAddress {
                text: rest.to_string(),
                optional: true,
            },
            None => BindAddress {
                text: word.to_string(),
                optional: false,
            },
        }
    }

    /// An address with a colon is IPv6, as in Redis.
    pub fn is_ipv6(&self) -> bool {
        self.text.contains(':')
    }

    /// The IP to bind: `*` and `::*` are the wildcards of their family; a name is looked up
    /// (the first address of the family).
    fn resolve(&self) -> Result<IpAddr, SocketError> {
        match self.text.as_str() {
            "*" => return Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            "::*" => return Ok(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
            _ => {}
        }
        if let Ok(ip) = self.text.parse::<IpAddr>() {
            return Ok(ip);
        }
        let found = (self.text.as_str(), 0)
            .to_socket_addrs()
            .map_err(SocketError::at("getaddrinfo"))?
            .map(|a| a.ip())
            .find(|ip| ip.is_ipv6() == self.is_ipv6());
        found.ok_or_else(|| SocketError {
            step: "getaddrinfo",
            source: io::Error::from_raw_os_error(libc::EADDRNOTAVAIL),
        })
    }
}

/// A listening socket.
pub enum Listener {
    Tcp(TcpListener),
    /// `unixsocket`, with its path (how its clients are named).
    Unix(UnixListener, Arc<str>),
}

impl Listener {
    fn accept(&self) -> io::Result<(Stream, Peer, Peer)> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, peer) = listener.accept()?;
                let local = stream.local_addr().unwrap_or(peer);
                Ok((Stream::Tcp(stream), Peer::Tcp(peer), Peer::Tcp(local)))
            }
            Listener::Unix(listener, path) => {
                let (stream, _) = listener.accept()?;
                let name = Peer::Unix(path.clone());
                Ok((Stream::Unix(stream), name.clone(), name))
            }
        }
    }
}

impl Listener {
    fn source(&mut self) -> &mut dyn Source {
        match self {
            Listener::Tcp(listener) => listener,
            Listener::Unix(listener, _) => listener,
        }
    }
}

source_through!(Listener);

/// The listening sockets, bound and listening.
pub struct Bound {
    pub sockets: Vec<Listener>,
    /// The port they listen on (the one the kernel chose for `port 0`; `port` as
    /// configured when only the Unix socket listens).
    pub port: u16,
}

/// Binds every address of `bind` on `port` with `tcp-backlog`, then opens `unixsocket`.
/// A failing address that is optional and not available, or of a family the machine
/// lacks, is skipped (Redis's rules); any other failure stops start-up. With `port 0`
/// the first address gets a port from the kernel and the others share it.
pub fn listen(config: &Config) -> Result<Bound, ListenError> {
    let addresses: Vec<BindAddress> = config.bind.iter().map(|w| BindAddress::parse(w)).collect();
    let mut bound = if addresses.is_empty() {
        Bound {
            sockets: Vec::new(),
            port: config.port,
        }
    } else {
        listen_tcp(&addresses, config)?
    };
    if let Some(path) = &config.unixsocket {
        let listener = unix::listen(path, config.unixsocketperm, config.tcp_backlog)
            .map_err(ListenError::Unix)?;
        bound
            .sockets
            .push(Listener::Unix(listener, path.as_str().into()));
    }
    if bound.sockets.is_empty() {
        return Err(ListenError::Nowhere);
    }
    Ok(bound)
}

fn listen_tcp(addresses: &[BindAddress], config: &Config) -> Result<Bound, ListenError> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match listen_once(addresses, config.port, config.tcp_backlog) {
            Ok(bound) => {
                warn_if_backlog_capped(config.tcp_backlog);
                return Ok(bound);
            }
            Err(Retry::NewPort) if attempts < PORT_ZERO_ATTEMPTS => continue,
            Err(_) => return Err(ListenError::Failed { port: config.port }),
        }
    }
}

enum Retry {
    /// `port 0`: a later address found the first one's port taken; start over.
    NewPort,
    Fail,
}

fn listen_once(addresses: &[BindAddress], port: u16, backlog: i32) -> Result<Bound, Retry> {
    let mut sockets: Vec<Listener> = Vec::new();
    let mut chosen = port;
    for address in addresses {
        let opened = address
            .resolve()
            .and_then(|ip| open_listener(SocketAddr::new(ip, chosen), backlog));
        match opened {
            Ok(listener) => {
                let local = listener.local_addr().ok();
                if let Some(local) = local {
                    tracing::info!("listening on {local}");
                    if chosen == 0 {
                        chosen = local.port();
                    }
                }
                sockets.push(Listener::Tcp(TcpListener::from_std(listener)));
            }
            Err(e) => {
                tracing::warn!(
                    "Warning: Could not create server TCP listening socket {}:{chosen}: {e}",
                    address.text
                );
                if (e.address_not_available() && address.optional) || e.unsupported_family() {
                    continue;
                }
                if port == 0 && !sockets.is_empty() && e.address_in_use() {
                    return Err(Retry::NewPort);
                }
                return Err(Retry::Fail);
            }
        }
    }
    if sockets.is_empty() {
        return Err(Retry::Fail);
    }
    Ok(Bound {
        sockets,
        port: chosen,
    })
}

/// A non-blocking, close-on-exec listening socket with `SO_REUSEADDR` (and `IPV6_V6ONLY`
/// for IPv6, as Redis sets it), listening with `backlog`.
fn open_listener(addr: SocketAddr, backlog: i32) -> Result<std::net::TcpListener, SocketError> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(SocketError::at("socket"))?;
    if addr.is_ipv6() {
        socket
            .set_only_v6(true)
            .map_err(SocketError::at("setsockopt IPV6_V6ONLY"))?;
    }
    socket
        .set_reuse_address(true)
        .map_err(SocketError::at("setsockopt SO_REUSEADDR"))?;
    socket.bind(&addr.into()).map_err(SocketError::at("bind"))?;
    socket.listen(backlog).map_err(SocketError::at("listen"))?;
    socket
        .set_nonblocking(true)
        .map_err(SocketError::at("fcntl O_NONBLOCK"))?;
    Ok(socket.into())
}

/// Redis's start-up check: Linux silently caps a listen backlog at `somaxconn`.
fn warn_if_backlog_capped(backlog: i32) {
    let Ok(text) = std::fs::read_to_string(SOMAXCONN_PATH) else {
        return;
    };
    if let Ok(somaxconn) = text.trim().parse::<i64>()
        && somaxconn > 0
        && somaxconn < i64::from(backlog)
    {
        tracing::warn!(
            "WARNING: The TCP backlog setting of {backlog} cannot be enforced because {SOMAXCONN_PATH} is set to the lower value of {somaxconn}."
        );
    }
}

/// Bytes of a refused client's early input read and dropped before its socket is closed.
const REFUSED_INPUT_DRAIN_BYTES: usize = 64 * 1024;

/// Tells a connection why it is refused; the caller then drops (closes) it. Input the
/// client already sent (a command right after connecting) is read and dropped first: a
/// socket closed with unread input is reset at once, and the reset discards the reply
/// not yet sent. Best effort, as Redis's own refusals: the socket is fresh and empty.
pub fn refuse(stream: &mut (impl Read + Write), message: &[u8]) {
    let _ = stream.write(message);
    let mut buf = [0u8; 4096];
    let mut drained = 0;
    while drained < REFUSED_INPUT_DRAIN_BYTES {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Redis 7.0's protected mode: on, and the default user has no password, then a peer that
/// is not local is refused (with `DENIED`), whatever addresses the server listens on.
pub fn protected_mode_denies(config: &Config, peer: &Peer) -> bool {
    protected_mode_denies_with(config.protected_mode, config.requirepass.is_some(), peer)
}

/// `protected_mode_denies` from the two settings it reads.
pub fn protected_mode_denies_with(protected_mode: bool, password_set: bool, peer: &Peer) -> bool {
    protected_mode && !password_set && !peer.is_local()
}

/// A connection taken from a listener.
pub struct Connected {
    pub stream: Stream,
    pub peer: Peer,
    pub local: Peer,
}

/// What one call of `Listeners::accept` produced.
pub enum Accepted {
    Connection(Connected),
    /// The process is out of descriptors: a waiting connection was accepted on the spare
    /// descriptor, told `MAX_CLIENTS_REACHED` and closed. Count it as rejected.
    Refused,
    /// Nothing more to accept now (the timer retries if connections may be waiting).
    Done,
}

/// The listening sockets and what keeps them accepting when descriptors run out.
pub struct Listeners {
    sockets: Vec<Listener>,
    /// A descriptor held in reserve (`/dev/null`), given up to accept-and-refuse a
    /// connection when accept fails for lack of descriptors.
    spare: Option<OwnedFd>,
    /// Out of descriptors since the last accepted connection (logged once per episode).
    starved: bool,
    /// Connections may be waiting that no readiness event will announce again: the
    /// loop's timer calls `accept` once more.
    retry: bool,
}

fn open_spare() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}

fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Errors of accept(2) that belong to one connection (Linux passes pending network errors
/// of the new socket through accept): skip it and take the next.
fn connection_failed(e: &io::Error) -> bool {
    e.kind() == ErrorKind::Interrupted
        || matches!(
            e.raw_os_error(),
            Some(
                libc::ECONNABORTED
                    | libc::EPROTO
                    | libc::ENETDOWN
                    | libc::ENOPROTOOPT
                    | libc::EHOSTDOWN
                    | libc::ENONET
                    | libc::EHOSTUNREACH
                    | libc::EOPNOTSUPP
                    | libc::ENETUNREACH
                    | libc::EPERM
            )
        )
}

impl Listeners {
    pub fn new(sockets: Vec<Listener>) -> Listeners {
        Listeners {
            sockets,
            spare: open_spare(),
            starved: false,
            retry: false,
        }
    }

    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    pub fn sockets_mut(&mut self) -> impl Iterator<Item = &mut Listener> {
        self.sockets.iter_mut()
    }

    /// Closes the Unix socket and removes its file (Redis's `closeListeningSockets` at
    /// shutdown); the TCP sockets close with the process.
    pub fn remove_unix_socket(&mut self) {
        let Some(index) = self
            .sockets
            .iter()
            .position(|s| matches!(s, Listener::Unix(..)))
        else {
            return;
        };
        if let Listener::Unix(listener, path) = self.sockets.remove(index) {
            drop(listener);
            tracing::info!("Removing the unix socket file.");
            if let Err(e) = std::fs::remove_file(&*path) {
                tracing::warn!("Error removing the unix socket file: {}", os_error_text(&e));
            }
        }
    }

    /// Takes the next waiting connection of listener `index`. Call until `Done`: the
    /// listeners are edge-triggered.
    pub fn accept(&mut self, index: usize) -> Accepted {
        loop {
            match self.sockets[index].accept() {
                Ok((stream, peer, local)) => {
                    self.starved = false;
                    return Accepted::Connection(Connected {
                        stream,
                        peer,
                        local,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Accepted::Done,
                Err(e) if connection_failed(&e) => continue,
                Err(e) if out_of_descriptors(&e) => return self.refuse_on_spare(index, &e),
                Err(e) => {
                    tracing::warn!("Accepting client connection: {}", os_error_text(&e));
                    self.retry = true;
                    return Accepted::Done;
                }
            }
        }
    }

    /// accept(2) failed for lack of descriptors: free the spare, accept, refuse, reopen.
    fn refuse_on_spare(&mut self, index: usize, error: &io::Error) -> Accepted {
        if !self.starved {
            tracing::warn!(
                "Accepting client connection: {}; new connections are refused until descriptors are free (see maxclients and 'ulimit -n')",
                os_error_text(error)
            );
            self.starved = true;
        }
        let Some(spare) = self.spare.take() else {
            self.retry = true;
            return Accepted::Done;
        };
        drop(spare);
        let outcome = match self.sockets[index].accept() {
            Ok((mut stream, ..)) => {
                refuse(&mut stream, MAX_CLIENTS_REACHED);
                Accepted::Refused
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => Accepted::Done,
            Err(_) => {
                // Another thread took the freed descriptor first, or the connection failed.
                self.retry = true;
                Accepted::Done
            }
        };
        self.spare = open_spare();
        if self.spare.is_none() {
            self.retry = true;
        }
        outcome
    }

    /// Whether the timer should call `accept` on every listener again; reopens the spare
    /// descriptor if it is missing.
    pub fn take_retry(&mut self) -> bool {
        if self.spare.is_none() {
            self.spare = open_spare();
        }
        std::mem::take(&mut self.retry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_words() {
        let star = BindAddress::parse("*");
        assert_eq!(star.resolve().unwrap(), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert!(!star.is_ipv6() && !star.optional);
        let any6 = BindAddress::parse("-::*");
        assert!(any6.optional && any6.is_ipv6());
        assert_eq!(any6.resolve().unwrap(), IpAddr::V6(Ipv6Addr::UNSPECIFIED));
        assert_eq!(
            BindAddress::parse("-::1").resolve().unwrap(),
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        );
        assert_eq!(
            BindAddress::parse("10.1.2.3").resolve().unwrap(),
            "10.1.2.3".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn only_the_two_loopback_addresses_are_local() {
        let local = |text: &str| Peer::Tcp(text.parse().unwrap()).is_local();
        assert!(local("127.0.0.1:5000"));
        assert!(local("[::1]:5000"));
        // Redis compares the text: other loopback addresses are not local.
        assert!(!local("127.0.0.2:5000"));
        assert!(!local("[::ffff:127.0.0.1]:5000"));
        assert!(!local("10.0.0.1:5000"));
    }

    #[test]
    fn denied_is_one_resp_error_line() {
        assert!(DENIED.starts_with(b"-DENIED Redis is running in protected mode"));
        assert!(DENIED.ends_with(b"from the outside.\r\n"));
        assert_eq!(DENIED.iter().filter(|&&b| b == b'\r').count(), 1);
        assert!(!DENIED.windows(2).any(|w| w == b"  "));
    }
}
