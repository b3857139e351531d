//! The L7 firewall rule: one for every owned Ingress, gone with the last; on a Shared VPC, in
//! the host project.

use super::*;

#[test]
fn firewall_covers_every_ingress_and_disappears_with_the_last() {
    let snapshot = features();
    let a = translate(&snapshot, "shop").unwrap();
    let b = translate(&snapshot, "https-only").unwrap();
    let mut cfg = config();
    cfg.firewall_target_tags = vec!["node-b".into(), "node-a".into()];
    let fw = translate_firewall(&[&a, &b], &cfg).unwrap();
    assert_eq!(fw.allowed[0].ports, ["8080", "8443", "9090"]);
    assert_eq!(fw.target_tags, ["node-a", "node-b"]);
    assert!(translate_firewall(&[], &cfg).is_none());
    let create = firewall_hint(FirewallHintOp::Create, &fw, "shared-net", "host-project");
    assert_eq!(
        create,
        "gcloud compute firewall-rules create k8s-fw-l7--b9cddxmo --network shared-net --description \"GCE L7 firewall rule\" \
         --allow tcp:8080,tcp:8443,tcp:9090 --source-ranges 130.211.0.0/22,35.191.0.0/16 --target-tags node-a,node-b --project host-project"
    );
    let fw = translate_firewall(&[&b], &config()).unwrap();
    let update = firewall_hint(FirewallHintOp::Update, &fw, "shared-net", "p");
    assert_eq!(
        update,
        "gcloud compute firewall-rules update k8s-fw-l7--b9cddxmo --description \"GCE L7 firewall rule\" \
         --allow tcp:8443 --source-ranges 130.211.0.0/22,35.191.0.0/16 --project p"
    );
}

#[test]
fn on_a_shared_vpc_the_network_subnetwork_and_rule_are_the_host_projects() {
    let snapshot = features();
    let mut cfg = config();
    cfg.network_project = "host-project".into();
    cfg.subnetwork = Some("nodes".into());
    let shop = translate_ingress(
        &snapshot,
        &snapshot.ingresses[&ObjectKey::new("default", "shop")],
        &cfg,
    )
    .unwrap();
    let neg = &shop_backend(&shop).negs[0];
    assert_eq!(
        neg.neg.network.as_deref(),
        Some("projects/host-project/global/networks/default")
    );
    let region = neg.zone.rsplit_once('-').unwrap().0;
    assert_eq!(
        neg.neg.subnetwork,
        Some(format!(
            "projects/host-project/regions/{region}/subnetworks/nodes"
        ))
    );
    let fw = translate_firewall(&[&shop], &cfg).unwrap();
    assert_eq!(
        fw.network.as_deref(),
        Some("projects/host-project/global/networks/default")
    );
    // The load balancer itself stays in the cluster's project.
    assert!(shop_backend(&shop)
        .backend_service
        .health_checks
        .iter()
        .all(|h| h.starts_with(&format!("projects/{}/", cfg.project))));
}
