//! End to end: internal Ingresses (class `gce-internal`, issue 21). kubectl applies the GKE
//! documentation's my-ingress fanout (external) and an internal Ingress over the same two
//! Services; the operator builds the regional internal Application Load Balancer in the
//! emulator beside the global one, on the same NEGs:
//! - without a proxy-only subnet nothing regional is created and the Ingress gets a Warning with
//!   the gcloud command; run with gcloud against the emulator, the next sync succeeds;
//! - without a firewall rule admitting the proxy-only range (the default network's
//!   `default-allow-internal` is deleted first) a Warning carries the firewall command, and
//!   requests fail until it is run;
//! - real HTTP reaches both Services through the internal address's loopback mapping;
//! - gcloud lists and describes the regional resources;
//! - with a `spec.tls` Secret and `kubernetes.io/ingress.regional-static-ip-name` naming an
//!   address not yet reserved, a Warning names the annotation and the gcloud command; once it
//!   is run, HTTP and HTTPS share that address, and HTTPS verifies the Secret's certificate
//!   (a regional SSL certificate on the regional target HTTPS proxy);
//! - deleting either Ingress leaves the other serving; with both gone no regional resource (in
//!   any regional collection) and no NEG remains.

mod support;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use support::regional::REGION;
use support::tls::{https_get_with, self_signed, trusting};
use support::*;

const HOST: &str = "your-store.example";

/// The internal Ingress: the fanout's `/products` rule, `my-discounted-products` by default.
fn internal_ingress() -> String {
    fanout::ingress("internal", Some("gce-internal"), true)
}

#[test]
fn internal_ingress_beside_an_external_one_on_the_same_services() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    // The cluster's subnet (the internal address comes from it); no proxy-only subnet yet, and
    // no `default-allow-internal`, so nothing admits a proxy-only range.
    sys.compute_post(
        &format!("compute/v1/projects/{PROJECT}/regions/{REGION}/subnetworks"),
        &serde_json::json!({"name": "nodes", "network": "global/networks/default",
            "ipCidrRange": "10.1.2.0/24"}),
    )?;
    sys.compute_delete(&format!(
        "compute/v1/projects/{PROJECT}/global/firewalls/default-allow-internal"
    ))?;
    sys.apply_path(&repo_root().join("docs/examples"))?;
    sys.apply(&internal_ingress())?;
    sys.start_operator(&[])?;

    // 1. No proxy-only subnet: a Warning with the command, and nothing regional was created.
    let external = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.fix_missing_proxy_only_subnet("internal")?;

    // 2. The next sync builds it; the firewall does not admit the proxies yet.
    let ip = sys.wait_for_ingress_ip("default", "internal")?;
    assert!(ip.starts_with("10.1.2."), "internal IP {ip}");
    let internal = sys.wait_for_listener(&ip, 80)?;
    assert!(
        internal.starts_with("127.65.2."),
        "loopback of {ip}: {internal}"
    );
    let firewall = sys.warned_command("internal", "proxy-only subnet proxy-only-us-central1")?;
    assert!(
        firewall.starts_with("gcloud compute firewall-rules create ")
            && firewall.contains("--source-ranges=10.129.0.0/23"),
        "{firewall}"
    );
    // Healthy (Google's probe ranges are admitted by the operator's L7 rule), yet refused.
    wait_for("both regional backends HEALTHY", DEADLINE, || {
        let ing = sys.get_json(&["ingress", "internal"])?;
        let backends: Value = serde_json::from_str(
            ing["metadata"]["annotations"]["ingress.kubernetes.io/backends"]
                .as_str()
                .unwrap_or("{}"),
        )?;
        let states: Vec<&Value> = backends
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, v)| v)
            .collect();
        if states.len() == 2 && states.iter().all(|s| *s == "HEALTHY") {
            Ok(Some(()))
        } else {
            Err(anyhow!("backends annotation: {backends}"))
        }
    })
    .with_context(|| sys.logs())?;
    let (status, _) = sys.http_get(&internal, HOST, "/products")?;
    assert_eq!(status, 502, "the firewall does not admit the proxies yet");
    sys.gcloud(&firewall)?;

    // 3. Both Services through the internal address; the external one still serves.
    let products = sys.wait_for_response(&internal, HOST, "/products", 200, "\"pod\"")?;
    assert!(
        products.contains("products-") && !products.contains("discounted-"),
        "{products}"
    );
    let other = sys.wait_for_response(&internal, HOST, "/other", 200, "\"pod\"")?;
    assert!(other.contains("discounted-products-"), "{other}");
    sys.wait_for_response(&external, HOST, "/products", 200, "products-")?;

    // 4. gcloud lists and describes what the operator made; NEGs are shared.
    let ing = sys.get_json(&["ingress", "internal"])?;
    let um = ing["metadata"]["annotations"]["ingress.kubernetes.io/url-map"]
        .as_str()
        .ok_or_else(|| anyhow!("no url-map annotation: {ing}"))?
        .to_string();
    let listed: Value = serde_json::from_str(&sys.gcloud(&format!(
        "gcloud compute url-maps list --regions={REGION} --format=json"
    ))?)?;
    assert!(listed.to_string().contains(&um), "{listed}");
    let rule_name = um.replacen("-um-", "-fr-", 1);
    let rule: Value = serde_json::from_str(&sys.gcloud(&format!(
        "gcloud compute forwarding-rules describe {rule_name} --region={REGION} --format=json"
    ))?)?;
    assert_eq!(rule["loadBalancingScheme"], "INTERNAL_MANAGED", "{rule}");
    assert_eq!(rule["IPAddress"], ip.as_str());
    let backends = sys.regional_names("backendServices")?;
    assert_eq!(backends.len(), 2, "{backends:?}");
    let bs: Value = serde_json::from_str(&sys.gcloud(&format!(
        "gcloud compute backend-services describe {} --region={REGION} --format=json",
        backends[0]
    ))?)?;
    assert_eq!(bs["loadBalancingScheme"], "INTERNAL_MANAGED", "{bs}");
    let negs = sys.neg_names()?;
    for b in &backends {
        assert!(
            negs.contains(b),
            "regional backend {b} on the shared NEG: {negs:?}"
        );
    }

    // 5. HTTPS from a spec.tls Secret on a reserved internal address the annotation names:
    //    first a Warning with the command that reserves it, then both protocols on it.
    let (cert, key, _) = self_signed(HOST)?;
    let pem = sys.dir.path().join("internal-tls");
    std::fs::create_dir_all(&pem)?;
    std::fs::write(pem.join("tls.crt"), &cert)?;
    std::fs::write(pem.join("tls.key"), &key)?;
    sys.kubectl_ok(&[
        "create",
        "secret",
        "tls",
        "internal-tls",
        &format!("--cert={}", pem.join("tls.crt").display()),
        &format!("--key={}", pem.join("tls.key").display()),
    ])?;
    sys.apply(&internal_ingress().replace(
        "    kubernetes.io/ingress.class: gce-internal\nspec:\n",
        "    kubernetes.io/ingress.class: gce-internal\n    kubernetes.io/ingress.regional-static-ip-name: internal-vip\nspec:\n  tls:\n  - secretName: internal-tls\n",
    ))?;
    let reserve =
        sys.warned_command("internal", "kubernetes.io/ingress.regional-static-ip-name")?;
    assert_eq!(
        reserve,
        format!("gcloud compute addresses create internal-vip --region={REGION} --subnet=nodes --purpose=SHARED_LOADBALANCER_VIP")
    );
    sys.gcloud(&reserve)?;
    let vip: Value = serde_json::from_str(&sys.gcloud(&format!(
        "gcloud compute addresses describe internal-vip --region={REGION} --format=json"
    ))?)?;
    let vip = vip["address"].as_str().unwrap_or_default().to_string();
    assert!(vip.starts_with("10.1.2.") && vip != ip, "{vip} (was {ip})");
    wait_for("the Ingress on the reserved address", DEADLINE, || {
        let ing = sys.get_json(&["ingress", "internal"])?;
        Ok((ing["status"]["loadBalancer"]["ingress"][0]["ip"] == vip.as_str()).then_some(()))
    })
    .with_context(|| sys.logs())?;
    let secure = sys.wait_for_listener(&vip, 443)?;
    let verified = trusting(&cert)?;
    let response = wait_for("HTTPS through the internal address", DEADLINE, || {
        let r = https_get_with(verified.clone(), &secure, HOST, "/products");
        Ok(r.ok().filter(|r| r.starts_with("HTTP/1.1 200")))
    })
    .with_context(|| sys.logs())?;
    assert!(response.contains("products-"), "{response}");
    assert_eq!(sys.regional_names("sslCertificates")?.len(), 1);
    let plain = sys.wait_for_listener(&vip, 80)?;
    sys.wait_for_response(&plain, HOST, "/products", 200, "products-")?;

    // 6. Deleting the internal Ingress leaves the external one serving and nothing regional.
    sys.kubectl_ok(&["delete", "ingress", "internal", "--wait=true"])?;
    sys.wait_for_nothing_regional(false)?;
    sys.wait_for_response(&external, HOST, "/products", 200, "products-")?;
    for b in &backends {
        assert!(
            sys.neg_names()?.contains(b),
            "NEG {b} still used by my-ingress"
        );
    }

    // 7. Built again, then deleting the external Ingress leaves the internal one serving.
    sys.apply(&internal_ingress())?;
    let ip = sys.wait_for_ingress_ip("default", "internal")?;
    let internal = sys.wait_for_listener(&ip, 80)?;
    sys.wait_for_response(&internal, HOST, "/products", 200, "products-")?;
    sys.kubectl_ok(&["delete", "ingress", "my-ingress", "--wait=true"])?;
    sys.wait_for_no_global_lb()?;
    sys.wait_for_response(&internal, HOST, "/products", 200, "products-")?;
    sys.wait_for_response(&internal, HOST, "/other", 200, "discounted-products-")?;
    assert_eq!(sys.regional_names("backendServices")?, backends);

    // 8. With both gone nothing regional and no NEG is left.
    sys.kubectl_ok(&["delete", "ingress", "internal", "--wait=true"])?;
    sys.wait_for_nothing_regional(true)?;
    sys.stop_operator();
    Ok(())
}
