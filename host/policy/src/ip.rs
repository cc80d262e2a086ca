//! Classification of IP addresses into "public" (globally routable unicast)
//! and everything else (loopback, private, link-local, documentation, ...).
//!
//! The classification is deliberately conservative: when in doubt an address
//! is *not* public. IPv6 addresses that embed an IPv4 address (IPv4-mapped
//! `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are classified
//! by the embedded IPv4 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// True when `ip` is a globally routable unicast address that a tool may
/// reach without `allow_private`.
///
/// Refused (returns `false`) for IPv4: `0.0.0.0/8` (this network and
/// unspecified), `10/8`, `100.64/10` (CGNAT), `127/8`, `169.254/16`
/// (link-local, cloud metadata), `172.16/12`, `192.0.0/24`, `192.0.2/24`,
/// `192.88.99/24`, `192.168/16`, `198.18/15`, `198.51.100/24`,
/// `203.0.113/24`, `224/4` (multicast) and `240/4` (reserved, broadcast).
///
/// Refused for IPv6: `::/96` (unspecified, loopback and the deprecated
/// IPv4-compatible block), `64:ff9b:1::/48`, `100::/64`, `2001::/23`,
/// `2001:db8::/32`, `3fff::/20`, `fc00::/7` (unique local), `fe80::/10`
/// (link-local), `fec0::/10` (site-local), `ff00::/8` (multicast); plus any
/// IPv4-mapped, NAT64 or 6to4 address whose embedded IPv4 address is refused.
pub fn is_public_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    let refused = o[0] == 0 // 0.0.0.0/8: "this network", unspecified
        || o[0] == 10 // private
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64/10 CGNAT
        || o[0] == 127 // loopback
        || (o[0] == 169 && o[1] == 254) // link-local (cloud metadata)
        || (o[0] == 172 && (o[1] & 0xf0) == 16) // 172.16/12 private
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 192 && o[1] == 0 && o[2] == 2) // TEST-NET-1
        || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 6to4 relay anycast
        || (o[0] == 192 && o[1] == 168) // private
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18/15 benchmarking
        || (o[0] == 198 && o[1] == 51 && o[2] == 100) // TEST-NET-2
        || (o[0] == 203 && o[1] == 0 && o[2] == 113) // TEST-NET-3
        || o[0] >= 224; // multicast 224/4, reserved 240/4, broadcast
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // ::/96: unspecified, loopback, deprecated IPv4-compatible addresses.
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        return false;
    }
    // 64:ff9b::/96 well-known NAT64 prefix: judge the embedded IPv4 address.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(embedded_v4(s[6], s[7]));
    }
    // 64:ff9b:1::/48 local-use NAT64.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return false;
    }
    // 100::/64 discard-only.
    if s[..4] == [0x100, 0, 0, 0] {
        return false;
    }
    // 2001::/23 IETF protocol assignments (Teredo, ORCHID, ...).
    if s[0] == 0x2001 && s[1] < 0x200 {
        return false;
    }
    // 2001:db8::/32 and 3fff::/20 documentation.
    if (s[0] == 0x2001 && s[1] == 0xdb8) || (s[0] & 0xfff0) == 0x3ff0 {
        return false;
    }
    // 2002::/16 6to4: judge the embedded IPv4 address.
    if s[0] == 0x2002 {
        return is_public_v4(embedded_v4(s[1], s[2]));
    }
    // fc00::/7 unique local, fe80::/10 link-local, fec0::/10 site-local,
    // ff00::/8 multicast.
    if (s[0] & 0xfe00) == 0xfc00 || (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        return false;
    }
    if (s[0] & 0xff00) == 0xff00 {
        return false;
    }
    true
}

fn embedded_v4(hi: u16, lo: u16) -> Ipv4Addr {
    let [a, b] = hi.to_be_bytes();
    let [c, d] = lo.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_table() {
        let table: &[(&str, bool)] = &[
            ("8.8.8.8", true),
            ("93.184.216.34", true),
            ("1.1.1.1", true),
            ("0.0.0.0", false),
            ("0.1.2.3", false),
            ("10.0.0.1", false),
            ("100.64.0.1", false),
            ("100.127.255.255", false),
            ("100.128.0.1", true),
            ("127.0.0.1", false),
            ("127.255.255.254", false),
            ("169.254.169.254", false),
            ("172.15.255.255", true),
            ("172.16.0.1", false),
            ("172.31.255.255", false),
            ("172.32.0.1", true),
            ("192.0.0.8", false),
            ("192.0.2.1", false),
            ("192.88.99.1", false),
            ("192.168.1.1", false),
            ("198.18.0.1", false),
            ("198.19.255.255", false),
            ("198.51.100.7", false),
            ("203.0.113.9", false),
            ("224.0.0.1", false),
            ("239.255.255.250", false),
            ("240.0.0.1", false),
            ("255.255.255.255", false),
            ("::", false),
            ("::1", false),
            ("::127.0.0.1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:10.0.0.1", false),
            ("::ffff:8.8.8.8", true),
            ("64:ff9b::7f00:1", false),
            ("64:ff9b::808:808", true),
            ("64:ff9b:1::1", false),
            ("100::1", false),
            ("2001::1", false),
            ("2001:db8::1", false),
            ("3fff::1", false),
            ("2002:7f00:1::1", false),
            ("2002:808:808::1", true),
            ("fc00::1", false),
            ("fd12:3456::1", false),
            ("fe80::1", false),
            ("febf::1", false),
            ("fec0::1", false),
            ("ff02::1", false),
            ("2606:4700:4700::1111", true),
            ("2a00:1450:4001:80e::200e", true),
        ];
        for (text, public) in table {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(is_public_address(ip), *public, "{text}");
        }
    }
}
