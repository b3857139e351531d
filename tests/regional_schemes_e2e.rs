//! End to end: one Service port behind an internal (`gce-internal`, INTERNAL_MANAGED) and a
//! regional external (`gce-regional-external`, EXTERNAL_MANAGED) Ingress in the same region
//! (issue 44, finding 4). A regional backend service has one `loadBalancingScheme`, so, as GKE
//! does (ingress-gce `RXLBBackendName`), each class gets its own backend service and health
//! check per Service port: the internal one named as the NEG (`gclb-<uid8>-...`), the regional
//! external one `gclb-<uid8>-e-...`, both on the shared NEGs:
//! - both load balancers serve both Services at once;
//! - the region holds four backend services and four health checks, two of each scheme, and
//!   each Ingress's `ingress.kubernetes.io/backends` names its own;
//! - the internal Ingress with a TLS Secret, a reserved internal address and a FrontendConfig
//!   `redirectToHttps` answers 301 to `https://` on port 80 and serves HTTPS on 443 (Google's
//!   "Set up HTTP-to-HTTPS redirect for regional internal Application Load Balancers");
//! - deleting the internal Ingress collects only its backend services and health checks: the
//!   regional external one keeps serving; with both gone nothing regional is left.

mod support;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use support::compute::wait_for_https_redirect;
use support::regional::REGION;
use support::tls::{https_get_with, self_signed, trusting};
use support::*;

const HOST: &str = "your-store.example";

fn regional(collection: &str, name: &str) -> String {
    format!("compute/v1/projects/{PROJECT}/regions/{REGION}/{collection}/{name}")
}

/// `(name, loadBalancingScheme)` of every regional backend service, sorted by name.
fn backend_schemes(sys: &System) -> Result<Vec<(String, String)>> {
    sys.regional_names("backendServices")?
        .into_iter()
        .map(|name| {
            let bs = sys.compute_get(&regional("backendServices", &name))?;
            let scheme = bs["loadBalancingScheme"].as_str().unwrap_or("").to_string();
            Ok((name, scheme))
        })
        .collect()
}

/// The names in Ingress `name`'s `ingress.kubernetes.io/backends` annotation, once all are
/// `HEALTHY`.
fn healthy_backends(sys: &System, name: &str) -> Result<Vec<String>> {
    wait_for(&format!("{name}'s backends HEALTHY"), DEADLINE, || {
        let ing = sys.get_json(&["ingress", name])?;
        let backends: Value = serde_json::from_str(
            ing["metadata"]["annotations"]["ingress.kubernetes.io/backends"]
                .as_str()
                .unwrap_or("{}"),
        )?;
        let map = backends.as_object().cloned().unwrap_or_default();
        if map.len() == 2 && map.values().all(|s| s == "HEALTHY") {
            Ok(Some(map.keys().cloned().collect()))
        } else {
            Err(anyhow!("{name} backends annotation: {backends}"))
        }
    })
    .with_context(|| sys.logs())
}

#[test]
fn one_service_port_behind_an_internal_and_a_regional_external_ingress() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    // The cluster's subnet and the region's proxy-only subnet, up front.
    for (name, extra) in [
        ("nodes", serde_json::json!({"ipCidrRange": "10.1.2.0/24"})),
        (
            "proxy-only",
            serde_json::json!({"ipCidrRange": "10.129.0.0/23",
                "purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE"}),
        ),
    ] {
        let mut body = serde_json::json!({"name": name, "network": "global/networks/default"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        sys.compute_post(
            &format!("compute/v1/projects/{PROJECT}/regions/{REGION}/subnetworks"),
            &body,
        )?;
    }
    sys.apply_path(&repo_root().join("docs/examples"))?;
    sys.apply(&fanout::ingress("internal", Some("gce-internal"), true))?;
    sys.apply(&fanout::ingress(
        "regional",
        Some("gce-regional-external"),
        true,
    ))?;
    sys.start_operator(&[])?;

    // 1. Both load balancers serve both Services at once.
    let mut sockets = Vec::new();
    for name in ["internal", "regional"] {
        let ip = sys.wait_for_ingress_ip("default", name)?;
        let socket = sys.wait_for_listener(&ip, 80)?;
        let products = sys.wait_for_response(&socket, HOST, "/products", 200, "\"pod\"")?;
        assert!(
            products.contains("products-") && !products.contains("discounted-"),
            "{name}: {products}"
        );
        sys.wait_for_response(&socket, HOST, "/other", 200, "discounted-products-")?;
        sockets.push(socket);
    }

    // 2. One backend service and one health check per Service port and scheme, on the shared
    //    NEGs; each Ingress reports its own.
    let internal_backends = healthy_backends(&sys, "internal")?;
    let regional_backends = healthy_backends(&sys, "regional")?;
    let schemes = backend_schemes(&sys)?;
    assert_eq!(schemes.len(), 4, "{schemes:?}");
    let negs = sys.neg_names()?;
    for (name, scheme) in &schemes {
        let (mine, shape) = if scheme == "INTERNAL_MANAGED" {
            (&internal_backends, negs.contains(name))
        } else {
            assert_eq!(scheme, "EXTERNAL_MANAGED", "{name}");
            (
                &regional_backends,
                name.contains("-e-") && !negs.contains(name),
            )
        };
        assert!(
            shape,
            "{name} ({scheme}) named for its class; NEGs {negs:?}"
        );
        assert!(mine.contains(name), "{name} ({scheme}) in {mine:?}");
        let bs = sys.compute_get(&regional("backendServices", name))?;
        assert!(
            bs["healthChecks"][0]
                .as_str()
                .is_some_and(|h| h.ends_with(&format!("/healthChecks/{name}"))),
            "{bs}"
        );
    }
    let mut checks = sys.regional_names("healthChecks")?;
    checks.sort();
    let names: Vec<String> = schemes.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(checks, names);

    // 3. The internal Ingress's HTTP-to-HTTPS redirect on a reserved internal address.
    internal_redirect(&sys)?;

    // 4. Deleting the internal Ingress collects only its backend services and health checks.
    sys.kubectl_ok(&["delete", "ingress", "internal", "--wait=true"])?;
    let left: Vec<(String, String)> = schemes
        .iter()
        .filter(|(_, s)| s == "EXTERNAL_MANAGED")
        .cloned()
        .collect();
    wait_for("only the EXTERNAL_MANAGED backends left", DEADLINE, || {
        let now = backend_schemes(&sys)?;
        let checks = sys.regional_names("healthChecks")?;
        let want: Vec<String> = left.iter().map(|(n, _)| n.clone()).collect();
        if now == left && checks == want {
            Ok(Some(()))
        } else {
            Err(anyhow!(
                "backend services {now:?}, health checks {checks:?}"
            ))
        }
    })
    .with_context(|| sys.logs())?;
    sys.wait_for_response(&sockets[1], HOST, "/products", 200, "products-")?;
    sys.wait_for_response(&sockets[1], HOST, "/other", 200, "discounted-products-")?;

    // 5. With both gone nothing regional is left.
    sys.kubectl_ok(&["delete", "ingress", "regional", "--wait=true"])?;
    sys.wait_for_nothing_regional(false)?;
    sys.stop_operator();
    Ok(())
}

/// The internal Ingress with a TLS Secret, `regional-static-ip-name: internal-vip` (reserved
/// first, SHARED_LOADBALANCER_VIP in the cluster's subnet) and a FrontendConfig
/// `redirectToHttps`: `GET http://VIP/products` answers 301 to `https://`, HTTPS serves it.
fn internal_redirect(sys: &System) -> Result<()> {
    sys.gcloud(&format!(
        "gcloud compute addresses create internal-vip --region={REGION} --subnet=nodes --purpose=SHARED_LOADBALANCER_VIP"
    ))?;
    let vip = sys.compute_get(&regional("addresses", "internal-vip"))?;
    let vip = vip["address"].as_str().unwrap_or_default().to_string();
    let (cert, key, _) = self_signed(HOST)?;
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    let ingress = fanout::ingress("internal", Some("gce-internal"), true)
        .replace(
            "    kubernetes.io/ingress.class: gce-internal\n",
            "    kubernetes.io/ingress.class: gce-internal\n    kubernetes.io/ingress.regional-static-ip-name: internal-vip\n    networking.gke.io/v1beta1.FrontendConfig: to-https\n",
        )
        .replace("spec:\n", "spec:\n  tls:\n  - secretName: internal-tls\n");
    sys.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: internal-tls}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\napiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {{name: to-https}}\nspec:\n  redirectToHttps: {{enabled: true}}\n---\n{ingress}",
        b64(&cert),
        b64(&key)
    ))?;
    let plain = sys.wait_for_listener(&vip, 80)?;
    wait_for_https_redirect("the internal HTTP rule", &plain, HOST, "/products", 301)
        .with_context(|| sys.logs())?;
    let secure = sys.wait_for_listener(&vip, 443)?;
    let verified = trusting(&cert)?;
    let response = wait_for("HTTPS through the internal address", DEADLINE, || {
        let r = https_get_with(verified.clone(), &secure, HOST, "/products");
        Ok(r.ok().filter(|r| r.starts_with("HTTP/1.1 200")))
    })
    .with_context(|| sys.logs())?;
    assert!(response.contains("products-"), "{response}");
    Ok(())
}
