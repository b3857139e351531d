//! End to end: regional external Ingresses (class `gce-regional-external`, issue 21). kubectl
//! applies the GKE documentation's my-ingress fanout (global external) and a regional external
//! Ingress over the same two Services; the operator builds the regional external Application
//! Load Balancer (EXTERNAL_MANAGED, regional resources) beside the global one, on the same
//! NEGs:
//! - without a proxy-only subnet nothing regional is created and the Ingress gets a Warning with
//!   the gcloud command; run with gcloud against the emulator, the next sync succeeds;
//! - its address is a regional EXTERNAL one from the emulator's loopback range, served as is
//!   (no internal mapping), and real HTTP reaches both Services through it;
//! - gcloud lists and describes the regional forwarding rule (EXTERNAL_MANAGED, network,
//!   networkTier); the backend services are named `...-e-...` (GKE's `RXLBBackendName`) on the
//!   shared NEGs;
//! - `kubernetes.io/ingress.regional-static-ip-name` naming a global address gives a Warning
//!   naming the annotation with the command that reserves the regional one; once run, the
//!   Ingress moves to that address;
//! - with a TLS Secret and a FrontendConfig `redirectToHttps`, HTTP on that address answers 301
//!   to `https://` and HTTPS serves the request (the regional HTTP-to-HTTPS redirect);
//! - deleting either Ingress leaves the other serving; with both gone no regional resource and
//!   no NEG remains.

mod support;

use anyhow::{Context, Result};
use base64::Engine;
use serde_json::Value;
use support::compute::wait_for_https_redirect;
use support::regional::REGION;
use support::*;

const HOST: &str = "your-store.example";

/// The regional external Ingress: the fanout's `/products` rule, `my-discounted-products` by default.
fn regional_ingress() -> String {
    fanout::ingress("regional", Some("gce-regional-external"), true)
}

fn ingress_ip(sys: &System) -> Result<Option<String>> {
    let ing = sys.get_json(&["ingress", "regional"])?;
    Ok(ing["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .map(str::to_string))
}

/// The regional Ingress with a TLS Secret, `regional-static-ip-name: regional-ip` and a
/// FrontendConfig `redirectToHttps`, on the reserved address `ip`: `GET http://.../products`
/// answers 301 with `Location: https://your-store.example/products` (Google's regional external
/// Application Load Balancer: a regional URL map with `defaultUrlRedirect.httpsRedirect` behind
/// the port-80 rule on the same address), and HTTPS on port 443 serves `my-products` with the
/// Secret's certificate.
fn https_with_redirect(sys: &System, ip: &str) -> Result<()> {
    let (crt, key, der) = support::tls::self_signed(HOST)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let ingress = regional_ingress()
        .replace(
            "    kubernetes.io/ingress.class: gce-regional-external\n",
            "    kubernetes.io/ingress.class: gce-regional-external\n    kubernetes.io/ingress.regional-static-ip-name: regional-ip\n    networking.gke.io/v1beta1.FrontendConfig: to-https\n",
        )
        .replace("spec:\n", "spec:\n  tls:\n  - secretName: store-tls\n");
    sys.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: store-tls}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\napiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {{name: to-https}}\nspec:\n  redirectToHttps: {{enabled: true}}\n---\n{ingress}",
        b64(&crt),
        b64(&key)
    ))?;
    let http = sys.wait_for_listener(ip, 80)?;
    wait_for_https_redirect("the regional HTTP rule", &http, HOST, "/products?x=1", 301)
        .with_context(|| sys.logs())?;
    let https = wait_for(&format!("a listener on {ip}:443"), DEADLINE, || {
        sys.listener_for(ip, 443)
    })
    .with_context(|| sys.logs())?;
    wait_for("HTTPS served by my-products", DEADLINE, || {
        let (leaf, response) = support::tls::https_get(&https, HOST, "/products")?;
        if response.starts_with("HTTP/1.1 200") && response.contains("products-") && leaf == der {
            Ok(Some(()))
        } else {
            Err(anyhow::anyhow!(
                "got {}",
                response.chars().take(200).collect::<String>()
            ))
        }
    })
    .with_context(|| sys.logs())?;
    Ok(())
}

#[test]
fn regional_external_ingress_beside_a_global_one_on_the_same_services() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_path(&repo_root().join("docs/examples"))?;
    sys.apply(&regional_ingress())?;
    sys.start_operator(&[])?;

    // 1. No proxy-only subnet: a Warning with the command, and nothing regional was created.
    let external = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.fix_missing_proxy_only_subnet("regional")?;

    // 2. The next sync builds it on an external address of the loopback range, served as is.
    let ip = sys.wait_for_ingress_ip("default", "regional")?;
    assert!(ip.starts_with("127.") && !ip.starts_with("127.64."), "{ip}");
    let regional = sys.wait_for_listener(&ip, 80)?;
    assert!(regional.starts_with(&format!("{ip}:")), "{regional}");
    let products = sys.wait_for_response(&regional, HOST, "/products", 200, "\"pod\"")?;
    assert!(
        products.contains("products-") && !products.contains("discounted-"),
        "{products}"
    );
    sys.wait_for_response(&regional, HOST, "/other", 200, "discounted-products-")?;
    sys.wait_for_response(&external, HOST, "/products", 200, "products-")?;

    // 3. gcloud lists and describes the forwarding rule; backends are EXTERNAL_MANAGED on the
    //    shared NEGs.
    let listed: Value = serde_json::from_str(&sys.gcloud(&format!(
        "gcloud compute forwarding-rules list --regions={REGION} --format=json"
    ))?)?;
    let rules = listed.as_array().cloned().unwrap_or_default();
    assert_eq!(rules.len(), 1, "{listed}");
    let name = rules[0]["name"].as_str().unwrap_or_default();
    let rule: Value = serde_json::from_str(&sys.gcloud(&format!(
        "gcloud compute forwarding-rules describe {name} --region={REGION} --format=json"
    ))?)?;
    assert_eq!(rule["loadBalancingScheme"], "EXTERNAL_MANAGED", "{rule}");
    assert_eq!(rule["networkTier"], "PREMIUM", "{rule}");
    assert_eq!(rule["IPAddress"], ip.as_str(), "{rule}");
    assert!(
        rule["network"]
            .as_str()
            .is_some_and(|n| n.ends_with("/global/networks/default")),
        "{rule}"
    );
    let backends = sys.regional_names("backendServices")?;
    assert_eq!(backends.len(), 2, "{backends:?}");
    let bs = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/regions/{REGION}/backendServices/{}",
        backends[0]
    ))?;
    assert_eq!(bs["loadBalancingScheme"], "EXTERNAL_MANAGED", "{bs}");
    // Named as GKE names the regional external class's backend services (`RXLBBackendName`:
    // `-e-` after the cluster UID), on the NEGs of the same Service ports.
    let negs = sys.neg_names()?;
    assert!(
        backends
            .iter()
            .all(|b| b.contains("-e-") && negs.contains(&b.replacen("-e-", "-", 1))),
        "{backends:?} {negs:?}"
    );

    // 4. regional-static-ip-name naming a global address: a Warning naming the annotation and
    //    the command that reserves the regional one; then the Ingress moves to it.
    sys.reserve_global_address("regional-ip")?;
    sys.kubectl_ok(&[
        "annotate",
        "ingress",
        "regional",
        "kubernetes.io/ingress.regional-static-ip-name=regional-ip",
    ])?;
    let reserve = sys.warned_command("regional", "is a global address")?;
    assert_eq!(
        reserve,
        format!(
            "gcloud compute addresses create regional-ip --region={REGION} --network-tier=PREMIUM"
        )
    );
    sys.gcloud(&reserve)?;
    let reserved = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/regions/{REGION}/addresses/regional-ip"
    ))?;
    let reserved = reserved["address"].as_str().unwrap_or_default().to_string();
    wait_for("the Ingress on the reserved address", DEADLINE, || {
        Ok((ingress_ip(&sys)?.as_deref() == Some(reserved.as_str())).then_some(()))
    })
    .with_context(|| sys.logs())?;
    let regional = sys.wait_for_listener(&reserved, 80)?;
    sys.wait_for_response(&regional, HOST, "/products", 200, "products-")?;

    // 4b. HTTPS and FrontendConfig redirectToHttps on the reserved address: the regional HTTP
    //     rule answers 301 to https://, and the regional HTTPS rule serves the request.
    https_with_redirect(&sys, &reserved)?;

    // 5. Deleting the regional Ingress leaves the global one serving and nothing regional.
    sys.kubectl_ok(&["delete", "ingress", "regional", "--wait=true"])?;
    sys.wait_for_nothing_regional(false)?;
    sys.wait_for_response(&external, HOST, "/products", 200, "products-")?;

    // 6. Built again, then deleting the global Ingress leaves the regional one serving.
    sys.apply(&regional_ingress())?;
    let ip = sys.wait_for_ingress_ip("default", "regional")?;
    let regional = sys.wait_for_listener(&ip, 80)?;
    sys.kubectl_ok(&["delete", "ingress", "my-ingress", "--wait=true"])?;
    sys.wait_for_no_global_lb()?;
    sys.wait_for_response(&regional, HOST, "/products", 200, "products-")?;
    sys.wait_for_response(&regional, HOST, "/other", 200, "discounted-products-")?;

    // 7. With both gone nothing regional and no NEG is left.
    sys.kubectl_ok(&["delete", "ingress", "regional", "--wait=true"])?;
    sys.wait_for_nothing_regional(true)?;
    sys.stop_operator();
    Ok(())
}
