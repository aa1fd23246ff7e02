//! Where a pool may make Apiary's functions call. A pool names URLs (its installer's webhook, its readiness check,
//! its cluster's API server, its vCenter) that the functions then call from their own network position, with their
//! roles: a pool must not be able to point them at their own neighbourhood.
//!
//! A URL is https, carries no credentials, and its host is neither the stack's own API nor an address, written or
//! resolved, that is loopback, link-local (169.254.0.0/16 and fe80::/10: the instance metadata service lives
//! there), the metadata service's IPv6 address (fd00:ec2::254), unspecified, broadcast or multicast. A private
//! address (10/8, 172.16/12, 192.168/16, the shared 100.64/10, unique local fc00::/7) is allowed only within the
//! ranges the stack allows (`AllowedPrivateRanges`, for a vCenter on a private network). An IPv4 address written as
//! IPv6 (`::ffff:127.0.0.1`, `::127.0.0.1`, NAT64's `64:ff9b::7f00:1`) is judged as the IPv4 address it stands
//! for. The local stack (`make run`) allows http, loopback and private addresses: its fake clouds listen on
//! 127.0.0.x.
//!
//! [`UrlPolicy::check_url`] judges a URL as written: when a pool is stored, and before each request.
//! [`UrlPolicy::check_address`] judges each address a name resolves to, when a connection is made, so that a name
//! re-pointed after the check cannot reach what the URL could not have named.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::FieldError;
use crate::model::PoolSpec;

/// The AWS instance metadata service's IPv6 address (inside the unique-local range a stack might allow).
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// What the stack lets a pool's URLs reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UrlPolicy {
    /// The local stack: http, loopback and private addresses are allowed.
    pub local: bool,
    /// Private ranges the stack allows (`AllowedPrivateRanges`).
    pub private: Vec<IpNet>,
    /// Hosts never called: the stack's own API.
    pub denied_hosts: Vec<String>,
}

impl UrlPolicy {
    /// The policy of a stack that allows `private` ranges (comma-separated CIDRs, `""` for none) and whose own API is
    /// `denied_hosts`; `Err` names a range that is not one.
    pub fn new(local: bool, private: &str, denied_hosts: Vec<String>) -> Result<Self, String> {
        let private = private
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| r.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| format!("{r:?} is not a CIDR range")))
            .collect::<Result<_, _>>()?;
        Ok(Self { local, private, denied_hosts })
    }

    /// Whether a function may connect to `ip`, or why not.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), String> {
        let ip = canonical(ip);
        let Some(kind) = kind(ip) else { return Ok(()) };
        let allowed = match kind {
            Kind::Loopback | Kind::Private => self.local || self.private.iter().any(|net| net.contains(&ip)),
            Kind::Forbidden(_) => false,
        };
        if allowed {
            return Ok(());
        }
        Err(match kind {
            Kind::Loopback => format!("{ip} is a loopback address"),
            Kind::Private => format!("{ip} is a private address outside the stack's AllowedPrivateRanges"),
            Kind::Forbidden(what) => format!("{ip} is {what}"),
        })
    }

    /// Whether a function may call `url` as written (its scheme, credentials and host), or why not.
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
        match parsed.scheme() {
            "https" => {}
            "http" if self.local => {}
            "http" => return Err("must be https (plain http only on the local stack)".into()),
            other => return Err(format!("must be https, not {other}")),
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("must not carry credentials (user:password@)".into());
        }
        match parsed.host() {
            None => Err("has no host".into()),
            Some(url::Host::Ipv4(ip)) => self.check_address(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check_address(IpAddr::V6(ip)),
            Some(url::Host::Domain(host)) => {
                let host = host.trim_end_matches('.').to_ascii_lowercase();
                if self.denied_hosts.iter().any(|d| d.eq_ignore_ascii_case(&host)) {
                    return Err(format!("{host} is this stack's own API"));
                }
                if !self.local && (host == "localhost" || host.ends_with(".localhost")) {
                    return Err(format!("{host} is a loopback name"));
                }
                Ok(())
            }
        }
    }
}

/// Checks every URL `spec` names against the stack's `policy`, each error with its field. A URL template is
/// checked as its placeholders will fill it; one that starts with an installer's output (`{outputs.apiUrl}/…`)
/// is checked when it is called.
pub fn validate_urls(spec: &PoolSpec, policy: &UrlPolicy) -> Vec<FieldError> {
    let mut urls: Vec<(&str, String)> = vec![];
    if let Some(w) = spec.provisioner.as_ref().and_then(|p| p.webhook.as_ref()) {
        urls.push(("provisioner.webhook.url", w.url.clone()));
    }
    if let Some(r) = &spec.readiness {
        if let Some(https) = &r.https {
            urls.push(("readiness.https.url", https.url.clone()));
        }
        if let Some(server) = r.kubernetes.as_ref().and_then(|k| k.server.clone()) {
            urls.push(("readiness.kubernetes.server", server));
        }
    }
    let hooks: Vec<(String, String)> =
        spec.notify.iter().enumerate().map(|(i, h)| (format!("notify[{i}].url"), h.url.clone())).collect();
    if let crate::model::Platform::Vsphere(vs) = &spec.platform {
        urls.push(("platform.vsphere.server", format!("https://{}/", vs.server)));
    }
    urls.extend(hooks.iter().map(|(field, url)| (field.as_str(), url.clone())));
    let mut errors = vec![];
    for (field, url) in urls {
        if url.starts_with("{outputs.") {
            continue;
        }
        let Ok(filled) = crate::model::fill_template(&url, |_| Some("x")) else { continue };
        if let Err(why) = policy.check_url(&filled) {
            errors.push(FieldError::new(field, format!("{}: {why}", super::shorten(&url))));
        }
    }
    errors
}

enum Kind {
    Loopback,
    Private,
    Forbidden(&'static str),
}

/// What `ip` is, when it is not a public address.
fn kind(ip: IpAddr) -> Option<Kind> {
    match ip {
        IpAddr::V4(a) => v4_kind(a),
        IpAddr::V6(a) if a.is_loopback() => Some(Kind::Loopback),
        IpAddr::V6(a) if a == METADATA_V6 => Some(Kind::Forbidden("the instance metadata service")),
        IpAddr::V6(a) if a.is_unspecified() => Some(Kind::Forbidden("the unspecified address")),
        IpAddr::V6(a) if a.is_multicast() => Some(Kind::Forbidden("a multicast address")),
        IpAddr::V6(a) if a.is_unicast_link_local() => Some(Kind::Forbidden("a link-local address")),
        IpAddr::V6(a) if a.is_unique_local() => Some(Kind::Private),
        IpAddr::V6(_) => None,
    }
}

fn v4_kind(a: Ipv4Addr) -> Option<Kind> {
    let [first, second, ..] = a.octets();
    if a.is_loopback() {
        Some(Kind::Loopback)
    } else if a.is_link_local() {
        Some(Kind::Forbidden("a link-local address (the instance metadata service's range)"))
    } else if first == 0 {
        Some(Kind::Forbidden("in this network's range (0.0.0.0/8)"))
    } else if a.is_broadcast() {
        Some(Kind::Forbidden("the broadcast address"))
    } else if a.is_multicast() {
        Some(Kind::Forbidden("a multicast address"))
    } else if a.is_private() || (first == 100 && (64..128).contains(&second)) {
        Some(Kind::Private)
    } else {
        None
    }
}

/// An IPv4 address written as IPv6 (mapped, compatible, or NAT64's well-known prefix) as the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if v6.is_loopback() || v6.is_unspecified() {
        return ip;
    }
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let low = |s: &[u16; 8]| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    // ::a.b.c.d (deprecated, but still parsed by resolvers) and 64:ff9b::a.b.c.d.
    if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return IpAddr::V4(low(&s));
    }
    ip
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict() -> UrlPolicy {
        UrlPolicy::new(false, "", vec!["abc123.execute-api.eu-west-1.amazonaws.com".into()]).unwrap_or_default()
    }

    #[test]
    fn addresses_of_the_functions_neighbourhood_are_refused_in_every_spelling() {
        let policy = strict();
        for (address, refused) in [
            ("93.184.215.14", false),
            ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", false),
            ("127.0.0.1", true),
            ("127.5.6.7", true),
            ("169.254.169.254", true),
            ("169.254.170.2", true),
            ("0.0.0.0", true),
            ("0.1.2.3", true),
            ("255.255.255.255", true),
            ("224.0.0.1", true),
            ("10.0.0.7", true),
            ("172.16.0.1", true),
            ("192.168.1.1", true),
            ("100.64.0.1", true),
            ("::1", true),
            ("::", true),
            ("fe80::1", true),
            ("fd00:ec2::254", true),
            ("fd12:3456::1", true),
            ("ff02::1", true),
            ("::ffff:127.0.0.1", true),
            ("::ffff:169.254.169.254", true),
            ("::127.0.0.1", true),
            ("64:ff9b::a9fe:a9fe", true),
            ("::ffff:93.184.215.14", false),
        ] {
            let ip: IpAddr = address.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            assert_eq!(policy.check_address(ip).is_err(), refused, "{address}");
        }
    }

    #[test]
    fn a_stack_may_allow_private_ranges_but_never_the_metadata_service_or_loopback() {
        let policy = UrlPolicy::new(false, "10.20.0.0/16, fc00::/7", vec![]).unwrap_or_default();
        assert_eq!(policy.private.len(), 2);
        assert_eq!(policy.check_address("10.20.3.4".parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))), Ok(()));
        for refused in ["10.21.0.1", "fd00:ec2::254", "169.254.169.254", "127.0.0.1"] {
            let ip: IpAddr = refused.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(policy.check_address(ip).is_err(), "{refused}");
        }
        assert!(UrlPolicy::new(false, "10.0.0.0/33", vec![]).is_err());
        assert!(UrlPolicy::new(false, "vcenter", vec![]).is_err());
    }

    #[test]
    fn urls_are_judged_by_scheme_credentials_and_host() {
        let policy = strict();
        for (url, ok) in [
            ("https://installer.example.com/apiary", true),
            ("https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:8443/x", true),
            ("http://installer.example.com/apiary", false),
            ("ftp://installer.example.com", false),
            ("https://user:pw@installer.example.com", false),
            ("https://127.0.0.1:9000", false),
            ("https://2130706433/", false),
            ("https://0x7f.1/", false),
            ("https://[::ffff:7f00:1]/", false),
            ("https://169.254.169.254/latest/meta-data/", false),
            ("https://localhost:8443", false),
            ("https://api.localhost", false),
            ("https://ABC123.execute-api.eu-west-1.amazonaws.com./v1/pools", false),
            ("not a url", false),
        ] {
            assert_eq!(policy.check_url(url).is_ok(), ok, "{url}: {:?}", policy.check_url(url));
        }
        let local = UrlPolicy { local: true, ..strict() };
        assert_eq!(local.check_url("http://127.0.0.1:9000/x"), Ok(()));
        assert!(local.check_url("https://169.254.169.254/").is_err(), "the metadata service, even locally");
    }

    #[test]
    fn a_pools_urls_are_checked_with_their_fields() {
        use crate::model::{HttpsProbe, ProvisionerSpec, ReadinessSpec, WebhookProvisioner};
        let fake = serde_json::from_value(serde_json::json!({"fake": {}})).expect("a fake platform");
        let mut spec = PoolSpec::new(1, fake);
        spec.provisioner = Some(ProvisionerSpec {
            webhook: Some(WebhookProvisioner {
                url: "http://127.0.0.1:9000".into(),
                secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:w".into(),
            }),
        });
        let https = HttpsProbe {
            url: "https://{clusterName}.169.254.169.254.nip.io/readyz".into(),
            ca_bundle: None,
            expected_status: None,
        };
        spec.readiness = Some(ReadinessSpec { https: Some(https), kubernetes: None, settle_pause: None });
        let fields: Vec<String> = validate_urls(&spec, &strict()).into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["provisioner.webhook.url"], "a name is judged by what it resolves to, when called");
        spec.readiness = None;
        assert_eq!(validate_urls(&spec, &UrlPolicy { local: true, ..strict() }), vec![]);
    }
}
