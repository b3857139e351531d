//! The collections that serve a global and a regional scope from one module, through the API's
//! own `insert` over an in-memory [`State`]: what the regional scope adds (each rule in Google's
//! words, naming the field), that the global scope does not apply it, and the reserved address
//! a forwarding rule's `IPAddress` names, looked up in the rule's own scope.

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::methods::{self, Target};
use crate::resources::{collection, Scope};
use crate::store::State;

const RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(127, 1, 0, 0), 16);
const BASE: &str = "http://h/compute/v1/";
const G: &str = "http://h/compute/v1/projects/p/global";
const R: &str = "http://h/compute/v1/projects/p/regions/us-east1";

fn insert(s: &mut State, scope: Scope, segment: &str, body: Value) -> Result<Value, ApiError> {
    let t = Target {
        coll: collection(scope, segment).unwrap(),
        project: "p".into(),
        zone: (scope == Scope::Regional).then(|| "us-east1".to_string()),
        name: None,
    };
    methods::insert(s, &t, body.to_string().as_bytes(), RANGE)?;
    let name = body["name"].as_str().unwrap();
    let key = match scope {
        Scope::Regional => format!("projects/p/regions/us-east1/{segment}/{name}"),
        _ => format!("projects/p/global/{segment}/{name}"),
    };
    Ok(s.resources[&key].as_ref().clone())
}

fn ok(s: &mut State, scope: Scope, segment: &str, body: Value) -> Value {
    insert(s, scope, segment, body.clone())
        .unwrap_or_else(|e| panic!("{segment} {body} refused: {e}"))
}

/// A 400 `invalid` naming `field` whose message ends with `words`, byte for byte.
fn assert_refused(r: Result<Value, ApiError>, field: &str, words: &str) {
    let e = r.expect_err("refused");
    assert_eq!((e.code, e.reason.as_str()), (400, "invalid"), "{e}");
    assert_eq!(e.field.as_deref(), Some(field), "{e}");
    assert!(
        e.message.ends_with(words),
        "{:?} lacks {words:?}",
        e.message
    );
}

/// The default network, and a regional external Application Load Balancer's parts in
/// us-east1 (backend service, URL map, target HTTP proxy, proxy-only subnet) beside a global
/// one's (backend service, URL map, target HTTP proxy).
fn state() -> State {
    let mut s = State::new(BASE.into());
    ok(
        &mut s,
        Scope::Global,
        "networks",
        json!({"name": "default"}),
    );
    for scope in [Scope::Global, Scope::Regional] {
        let at = if scope == Scope::Regional { R } else { G };
        ok(
            &mut s,
            scope,
            "backendServices",
            json!({"name": "bs", "loadBalancingScheme": "EXTERNAL_MANAGED"}),
        );
        ok(
            &mut s,
            scope,
            "urlMaps",
            json!({"name": "um", "defaultService": format!("{at}/backendServices/bs")}),
        );
        ok(
            &mut s,
            scope,
            "targetHttpProxies",
            json!({"name": "tp", "urlMap": format!("{at}/urlMaps/um")}),
        );
    }
    ok(
        &mut s,
        Scope::Regional,
        "subnetworks",
        json!({"name": "proxy-only", "network": format!("{G}/networks/default"),
               "ipCidrRange": "10.129.0.0/23", "purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE"}),
    );
    s
}

#[test]
fn a_regional_backend_service_is_one_of_a_regional_application_load_balancer() {
    let mut s = state();
    assert_refused(
        insert(&mut s, Scope::Regional, "backendServices", json!({"name": "dflt"})),
        "resource.loadBalancingScheme",
        "The emulator serves regional backend services of the regional Application Load Balancers only: use INTERNAL_MANAGED or EXTERNAL_MANAGED (passthrough Network Load Balancers are not emulated).",
    );
    assert_refused(
        insert(
            &mut s,
            Scope::Regional,
            "backendServices",
            json!({"name": "cdn", "loadBalancingScheme": "INTERNAL_MANAGED", "enableCDN": true}),
        ),
        "resource.enableCDN",
        "Cloud CDN is not supported for regional backend services; it requires the global external Application Load Balancer.",
    );
    let stored = ok(
        &mut s,
        Scope::Global,
        "backendServices",
        json!({"name": "dflt"}),
    );
    assert_eq!(
        stored["loadBalancingScheme"], "EXTERNAL",
        "the global default"
    );
    ok(
        &mut s,
        Scope::Global,
        "backendServices",
        json!({"name": "cdn", "enableCDN": true}),
    );
}

#[test]
fn a_regional_certificate_is_self_managed_only() {
    let mut s = state();
    let managed =
        json!({"name": "m", "type": "MANAGED", "managed": {"domains": ["a.example.com"]}});
    assert_refused(
        insert(&mut s, Scope::Regional, "sslCertificates", managed.clone()),
        "resource.type",
        "Regional SSL certificates can only be SELF_MANAGED.",
    );
    ok(&mut s, Scope::Global, "sslCertificates", managed);
}

#[test]
fn a_regional_resource_stays_in_its_region_and_carries_it() {
    let mut s = state();
    let stored = ok(
        &mut s,
        Scope::Regional,
        "urlMaps",
        json!({"name": "um2", "defaultService": format!("{R}/backendServices/bs")}),
    );
    assert_eq!(
        stored["region"],
        format!("{BASE}projects/p/regions/us-east1")
    );
    assert_refused(
        insert(
            &mut s,
            Scope::Regional,
            "urlMaps",
            json!({"name": "um3", "defaultService": format!("{G}/backendServices/bs")}),
        ),
        "resource.defaultService",
        "A regional resource in us-east1 can only reference backendServices in region us-east1.",
    );
    assert_refused(
        insert(
            &mut s,
            Scope::Global,
            "urlMaps",
            json!({"name": "um3", "defaultService": format!("{R}/backendServices/bs")}),
        ),
        "resource.defaultService",
        "use a global one.",
    );
}

#[test]
fn a_forwarding_rule_names_a_reserved_address_of_its_own_scope() {
    let mut s = state();
    for scope in [Scope::Global, Scope::Regional] {
        let (at, home, what) = match scope {
            Scope::Regional => (R, "projects/p/regions/us-east1", "regional"),
            _ => (G, "projects/p/global", "global"),
        };
        let rule = |name: &str, ip: &str| {
            json!({"name": name, "loadBalancingScheme": "EXTERNAL_MANAGED",
                   "target": format!("{at}/targetHttpProxies/tp"), "IPAddress": ip})
        };
        let vip = ok(&mut s, scope, "addresses", json!({"name": "vip"}));
        let stored = ok(&mut s, scope, "forwardingRules", rule("by-name", "vip"));
        assert_eq!(stored["IPAddress"], vip["address"], "{scope:?}");

        let e = insert(&mut s, scope, "forwardingRules", rule("missing", "none")).unwrap_err();
        assert_eq!(e.code, 404, "{scope:?}: {e}");
        assert_eq!(e.field.as_deref(), Some("resource.IPAddress"));
        assert!(
            e.message.contains(&format!("{home}/addresses/none")),
            "{scope:?}: {}",
            e.message
        );

        assert_refused(
            insert(
                &mut s,
                scope,
                "forwardingRules",
                rule("other", "projects/p/global/urlMaps/um"),
            ),
            "resource.IPAddress",
            &format!("Must be an IPv4 address or a reference to a {what} address."),
        );
    }
}
