//! Kubernetes' CEL IP and CIDR libraries (`k8s.io/apiserver/pkg/cel/library`, `ip.go`
//! and `cidr.go`), over `std::net`:
//!
//! | Call | Result |
//! |---|---|
//! | `ip(s)`, `isIP(s)`, `ip.isCanonical(s)` | an IP address; whether `s` is one; whether `s` is written canonically |
//! | `ip.family()` | `4` or `6` |
//! | `ip.isUnspecified()`, `isLoopback()`, `isLinkLocalMulticast()`, `isLinkLocalUnicast()`, `isGlobalUnicast()` | `bool` |
//! | `cidr(s)`, `isCIDR(s)` | a CIDR; whether `s` is one |
//! | `cidr.containsIP(ip or string)`, `cidr.containsCIDR(cidr or string)` | `bool` |
//! | `cidr.ip()`, `cidr.masked()`, `cidr.prefixLength()` | its address, the CIDR with the host bits cleared, its length |
//! | `string(ip)`, `string(cidr)` | the canonical text |
//!
//! As in Kubernetes, an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) and a zone
//! (`fe80::1%eth0`) are not accepted.

use std::any::Any;
use std::net::IpAddr;

use cel::ExecutionError;
use cel::common::types::{CelBool, CelInt, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};

use super::functions::{Overload, arity, fail, string_arg};

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

static IP_TYPE: Type = Type::new_unspecified_type("net.IP");
static CIDR_TYPE: Type = Type::new_unspecified_type("net.CIDR");

/// An IP address, as `ip(s)` makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ip(IpAddr);

/// An address and a prefix length, as `cidr(s)` makes it; the host bits are kept
/// until `masked()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cidr {
    address: IpAddr,
    prefix: u8,
}

impl Val for Ip {
    fn get_type(&self) -> &Type {
        &IP_TYPE
    }
    fn cel_type() -> &'static Type {
        &IP_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Ip>().is_some_and(|o| o == self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Ip {}

impl Val for Cidr {
    fn get_type(&self) -> &Type {
        &CIDR_TYPE
    }
    fn cel_type() -> &'static Type {
        &CIDR_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Cidr>().is_some_and(|o| o == self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Cidr {}

/// The overloads of this module.
pub fn overloads() -> Vec<Overload> {
    let ip = || IP_TYPE.to_owned();
    let cidr = || CIDR_TYPE.to_owned();
    let predicate = |name, id, op| Overload::method(name, id, ip(), vec![], op);
    vec![
        Overload::function("ip", "string_to_ip", vec![STRING_TYPE], make_ip),
        Overload::function("isIP", "is_ip_string", vec![STRING_TYPE], is_ip),
        Overload::function(
            "ip.isCanonical",
            "ip_is_canonical_string",
            vec![STRING_TYPE],
            is_canonical,
        ),
        Overload::function("string", "ip_to_string", vec![ip()], ip_string),
        Overload::method("family", "ip_family", ip(), vec![], family),
        predicate("isUnspecified", "ip_is_unspecified", is_unspecified),
        predicate("isLoopback", "ip_is_loopback", is_loopback),
        predicate(
            "isLinkLocalMulticast",
            "ip_is_link_local_multicast",
            is_link_local_multicast,
        ),
        predicate(
            "isLinkLocalUnicast",
            "ip_is_link_local_unicast",
            is_link_local_unicast,
        ),
        predicate("isGlobalUnicast", "ip_is_global_unicast", is_global_unicast),
        Overload::function("cidr", "string_to_cidr", vec![STRING_TYPE], make_cidr),
        Overload::function("isCIDR", "is_cidr_string", vec![STRING_TYPE], is_cidr),
        Overload::function("string", "cidr_to_string", vec![cidr()], cidr_string),
        Overload::method(
            "containsIP",
            "cidr_contains_ip_ip",
            cidr(),
            vec![ip()],
            contains_ip,
        ),
        Overload::method(
            "containsIP",
            "cidr_contains_ip_string",
            cidr(),
            vec![STRING_TYPE],
            contains_ip,
        ),
        Overload::method(
            "containsCIDR",
            "cidr_contains_cidr_cidr",
            cidr(),
            vec![cidr()],
            contains_cidr,
        ),
        Overload::method(
            "containsCIDR",
            "cidr_contains_cidr_string",
            cidr(),
            vec![STRING_TYPE],
            contains_cidr,
        ),
        Overload::method("ip", "cidr_ip", cidr(), vec![], cidr_ip),
        Overload::method("masked", "cidr_masked", cidr(), vec![], masked),
        Overload::method(
            "prefixLength",
            "cidr_prefix_length",
            cidr(),
            vec![],
            prefix_length,
        ),
    ]
}

/// Parses an address as Kubernetes does: no zone, no IPv4-mapped IPv6 form.
fn parse_ip(text: &str) -> Result<IpAddr, String> {
    if text.contains('%') {
        return Err(format!("IP address with zone value is not allowed: {text}"));
    }
    let address: IpAddr = text
        .parse()
        .map_err(|_| format!("IP Address {text:?} parse error"))?;
    if let IpAddr::V6(v6) = address
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address {text:?} is not allowed"));
    }
    Ok(address)
}

fn parse_cidr(text: &str) -> Result<Cidr, String> {
    let bad = || format!("network address {text:?} parse error");
    let (address, prefix) = text.split_once('/').ok_or_else(bad)?;
    let address = parse_ip(address)?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= max && !prefix.starts_with('+'))
        .ok_or_else(bad)?;
    Ok(Cidr { address, prefix })
}

fn ip_arg(function: &str, value: &dyn Val) -> Result<IpAddr, ExecutionError> {
    if let Some(ip) = value.downcast_ref::<Ip>() {
        return Ok(ip.0);
    }
    parse_ip(string_arg(function, value)?).map_err(|e| fail(function, e))
}

fn cidr_arg(function: &str, value: &dyn Val) -> Result<Cidr, ExecutionError> {
    if let Some(cidr) = value.downcast_ref::<Cidr>() {
        return Ok(*cidr);
    }
    parse_cidr(string_arg(function, value)?).map_err(|e| fail(function, e))
}

fn boolean<'b, 'v>(value: bool) -> CelResult<'b, 'v> {
    Ok(CowVal::owned(CelBool::from(value)))
}

fn make_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [text] = arity::<1>("ip", &args)?;
    Ok(CowVal::owned(Ip(ip_arg("ip", text)?)))
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [text] = arity::<1>("isIP", &args)?;
    boolean(parse_ip(string_arg("isIP", text)?).is_ok())
}

fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "ip.isCanonical";
    let [text] = arity::<1>(NAME, &args)?;
    let text = string_arg(NAME, text)?;
    let address = parse_ip(text).map_err(|e| fail(NAME, e))?;
    boolean(address.to_string() == text)
}

fn ip_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [ip] = arity::<1>("string", &args)?;
    let text = ip_arg("string", ip)?.to_string();
    Ok(CowVal::owned(CelString::from(text)))
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [ip] = arity::<1>("family", &args)?;
    let family = if ip_arg("family", ip)?.is_ipv4() {
        4
    } else {
        6
    };
    Ok(CowVal::owned(CelInt::from(family)))
}

/// Applies a predicate on the address to the call's target.
fn predicate<'b, 'v>(
    name: &str,
    args: &[CowVal<'b, 'v>],
    test: fn(IpAddr) -> bool,
) -> CelResult<'b, 'v> {
    let [ip] = arity::<1>(name, args)?;
    boolean(test(ip_arg(name, ip)?))
}

fn is_unspecified<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    predicate("isUnspecified", &args, |a| a.is_unspecified())
}

fn is_loopback<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    predicate("isLoopback", &args, |a| a.is_loopback())
}

fn link_local_multicast(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn link_local_unicast(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_unicast_link_local(),
    }
}

fn is_link_local_multicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    predicate("isLinkLocalMulticast", &args, link_local_multicast)
}

fn is_link_local_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    predicate("isLinkLocalUnicast", &args, link_local_unicast)
}

/// Go's `netip.Addr.IsGlobalUnicast`: none of the special addresses above, nor
/// multicast, nor the IPv4 broadcast address.
fn is_global_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    predicate("isGlobalUnicast", &args, |a| {
        let broadcast = matches!(a, IpAddr::V4(v4) if v4.is_broadcast());
        !(a.is_unspecified()
            || a.is_loopback()
            || a.is_multicast()
            || link_local_unicast(a)
            || broadcast)
    })
}

fn make_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [text] = arity::<1>("cidr", &args)?;
    Ok(CowVal::owned(cidr_arg("cidr", text)?))
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [text] = arity::<1>("isCIDR", &args)?;
    boolean(parse_cidr(string_arg("isCIDR", text)?).is_ok())
}

fn cidr_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [cidr] = arity::<1>("string", &args)?;
    let cidr = cidr_arg("string", cidr)?;
    let text = format!("{}/{}", cidr.address, cidr.prefix);
    Ok(CowVal::owned(CelString::from(text)))
}

/// The address with every bit after the first `prefix` cleared.
fn mask(address: IpAddr, prefix: u8) -> IpAddr {
    match address {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let kept = bits & u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(kept.into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let kept = bits & u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(kept.into())
        }
    }
}

fn contains(network: Cidr, address: IpAddr) -> bool {
    network.address.is_ipv4() == address.is_ipv4()
        && mask(network.address, network.prefix) == mask(address, network.prefix)
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "containsIP";
    let [network, address] = arity::<2>(NAME, &args)?;
    boolean(contains(cidr_arg(NAME, network)?, ip_arg(NAME, address)?))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "containsCIDR";
    let [network, other] = arity::<2>(NAME, &args)?;
    let (network, other) = (cidr_arg(NAME, network)?, cidr_arg(NAME, other)?);
    boolean(other.prefix >= network.prefix && contains(network, other.address))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [cidr] = arity::<1>("ip", &args)?;
    Ok(CowVal::owned(Ip(cidr_arg("ip", cidr)?.address)))
}

fn masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [cidr] = arity::<1>("masked", &args)?;
    let cidr = cidr_arg("masked", cidr)?;
    Ok(CowVal::owned(Cidr {
        address: mask(cidr.address, cidr.prefix),
        prefix: cidr.prefix,
    }))
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [cidr] = arity::<1>("prefixLength", &args)?;
    let prefix = cidr_arg("prefixLength", cidr)?.prefix;
    Ok(CowVal::owned(CelInt::from(i64::from(prefix))))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::evaluate_unbound as eval;

    #[test]
    fn addresses_and_networks_answer_as_in_kubernetes() {
        for source in [
            "isIP('1.2.3.4') && isIP('::1') && !isIP('1.2.3') && !isIP('::ffff:1.2.3.4')",
            "!isIP('fe80::1%eth0')",
            "ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')",
            "ip('1.2.3.4').family() == 4 && ip('::1').family() == 6",
            "ip('0.0.0.0').isUnspecified() && ip('127.0.0.1').isLoopback()",
            "ip('224.0.0.1').isLinkLocalMulticast() && ip('ff02::1').isLinkLocalMulticast()",
            "ip('169.254.1.1').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast()",
            "ip('8.8.8.8').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()",
            "ip('10.0.0.1') == ip('10.0.0.1') && string(ip('10.0.0.1')) == '10.0.0.1'",
            "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0')",
            "cidr('10.0.0.0/8').containsIP('10.1.2.3') && !cidr('10.0.0.0/8').containsIP(ip('11.0.0.1'))",
            "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
            "!cidr('10.0.0.0/8').containsIP('::1') && cidr('::/0').containsIP('2001:db8::1')",
            "cidr('0.0.0.0/0').containsIP('1.2.3.4')",
            "string(cidr('10.1.2.3/8').masked()) == '10.0.0.0/8' && cidr('10.1.2.3/8').prefixLength() == 8",
            "cidr('10.1.2.3/8').ip() == ip('10.1.2.3') && string(cidr('2001:db8::1/32').masked()) == '2001:db8::/32'",
        ] {
            assert_eq!(eval(source), Ok(json!(true)), "{source}");
        }
    }

    #[test]
    fn invalid_input_is_an_error_not_a_panic() {
        for (source, needle) in [
            ("ip('nope')", "parse error"),
            ("ip('::ffff:1.2.3.4')", "IPv4-mapped"),
            ("ip('fe80::1%eth0')", "zone"),
            ("cidr('10.0.0.0/40')", "parse error"),
            ("cidr('10.0.0.0/8').containsIP('x')", "parse error"),
            ("ip('1.2.3.4')", "no JSON form"),
        ] {
            match eval(source) {
                Err(error) => assert!(error.to_string().contains(needle), "{source}: {error}"),
                Ok(value) => panic!("{source}: {value}"),
            }
        }
    }
}
