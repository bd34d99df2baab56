//! A client's socket and its address, whichever listener it came through: TCP, or the
//! Unix socket of `unixsocket`. The event loop, the sessions and the replicas' links see
//! only `Stream` and `Peer`, so a new transport (TLS) is a variant here, not a branch in
//! the loop.

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

/// A connected client socket.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// TCP_NODELAY; a Unix socket has no Nagle delay to turn off.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.set_nodelay(on),
            Stream::Unix(_) => Ok(()),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.read(buf),
            Stream::Unix(stream) => stream.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.write(buf),
            Stream::Unix(stream) => stream.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.write_vectored(bufs),
            Stream::Unix(stream) => stream.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.flush(),
            Stream::Unix(stream) => stream.flush(),
        }
    }
}

impl Stream {
    fn source(&mut self) -> &mut dyn Source {
        match self {
            Stream::Tcp(stream) => stream,
            Stream::Unix(stream) => stream,
        }
    }
}

source_through!(Stream);

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(stream) => stream.as_raw_fd(),
            Stream::Unix(stream) => stream.as_raw_fd(),
        }
    }
}

/// One end of a client's connection, as CLIENT LIST, CLIENT KILL and the log name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    /// The server's Unix socket (`unixsocket`): both ends of such a connection are named
    /// by its path, as Redis names them (a client's own end of it has no name).
    Unix(Arc<str>),
}

impl Peer {
    /// Whether the peer counts as local (protected mode, `enable-debug-command local`):
    /// a Unix socket client, or 127.0.0.1 and ::1 exactly, as Redis 7.0 compares the
    /// peer's text (IPv6 sockets are IPv6-only, so an IPv4 peer never appears mapped).
    pub fn is_local(&self) -> bool {
        match self {
            Peer::Tcp(address) => match address.ip() {
                IpAddr::V4(ip) => ip == Ipv4Addr::LOCALHOST,
                IpAddr::V6(ip) => ip == Ipv6Addr::LOCALHOST,
            },
            Peer::Unix(_) => true,
        }
    }

    /// The IP address of a TCP peer.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Peer::Tcp(address) => Some(address.ip()),
            Peer::Unix(_) => None,
        }
    }

    /// How a MONITOR line names the client: `ip:port`, or `unix:<path>` (Redis's form).
    pub fn monitor_name(&self) -> String {
        match self {
            Peer::Tcp(address) => address.to_string(),
            Peer::Unix(path) => format!("unix:{path}"),
        }
    }
}

/// `ip:port` (`[ip6]:port`), or `<unixsocket>:0` as Redis's `genClientAddrString`.
impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Tcp(address) => write!(f, "{address}"),
            Peer::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_named_as_redis_names_them() {
        let tcp = Peer::Tcp("127.0.0.1:6379".parse().unwrap());
        assert_eq!(tcp.to_string(), "127.0.0.1:6379");
        assert_eq!(tcp.monitor_name(), "127.0.0.1:6379");
        let unix = Peer::Unix("/run/redis.sock".into());
        assert_eq!(unix.to_string(), "/run/redis.sock:0");
        assert_eq!(unix.monitor_name(), "unix:/run/redis.sock");
        assert!(unix.is_local() && unix.ip().is_none());
    }
}
