//! The install as `kubectl apply -k` renders it (deploy/ and its components,
//! docs/install.md): what each combination installs, that the local API accepts it, and that a
//! settings change rolls the operator.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use support::*;

/// `kubectl kustomize` of a kustomization that includes deploy/ (at `deploy`) with
/// `components`; returns the rendered YAML.
fn render(deploy: &Path, components: &[&str]) -> Result<String> {
    let dir = tempfile::tempdir()?;
    // kustomize only takes relative paths to other kustomizations.
    let up = dir
        .path()
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .map(|_| "..")
        .collect::<Vec<_>>()
        .join("/");
    let rel = |p: &Path| format!("{up}{}", p.display());
    let mut yaml = format!("resources:\n- {}\n", rel(deploy));
    if !components.is_empty() {
        yaml.push_str("components:\n");
        for c in components {
            yaml.push_str(&format!("- {}\n", rel(&deploy.join(c))));
        }
    }
    std::fs::write(dir.path().join("kustomization.yaml"), yaml)?;
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir.path())
        .output()
        .context("running kubectl kustomize")?;
    if !out.status.success() {
        bail!("kustomize: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

fn objects(yaml: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let v: Value = serde_yaml::from_value(serde::Deserialize::deserialize(doc)?)?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

/// `kind namespace/name` of every object.
fn ids(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap_or_default(),
                m["namespace"].as_str().unwrap_or_default(),
                m["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn config_map(objects: &[Value]) -> Result<&Value> {
    objects
        .iter()
        .find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("gclb-operator-config-"))
        })
        .context("no gclb-operator-config ConfigMap")
}

fn operator_container(objects: &[Value]) -> Result<&Value> {
    Ok(
        &find(objects, "Deployment", "gclb-operator").context("no operator Deployment")?["spec"]
            ["template"]["spec"]["containers"][0],
    )
}

fn deploy_dir() -> PathBuf {
    repo_root().join("deploy")
}

/// The default install runs beside GKE's controller: its own class (not the default), its own
/// default backend in its own namespace, nothing in kube-system, one image reference, settings
/// from the generated ConfigMap; and the local API accepts all of it.
#[test]
fn default_install_is_accepted_and_stays_out_of_gkes_way() -> Result<()> {
    let yaml = render(&deploy_dir(), &[])?;
    let objects = objects(&yaml)?;
    let ids = ids(&objects);
    assert!(
        !ids.iter().any(|i| i.contains(" kube-system/")),
        "the default install writes to kube-system: {ids:?}"
    );
    let class = find(&objects, "IngressClass", "gclb").context("no gclb IngressClass")?;
    assert_eq!(class["spec"]["controller"], "gclb-operator.dev/gclb");
    assert!(
        class["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"].is_null()
    );
    assert!(find(&objects, "IngressClass", "gce").is_none());
    let backend = find(&objects, "Service", "gclb-default-backend").context("own backend")?;
    assert_eq!(backend["metadata"]["namespace"], "gclb-operator");
    assert_eq!(backend["spec"]["ports"][0]["name"], "http");
    for name in ["gclb-operator", "gclb-default-backend"] {
        let d = find(&objects, "Deployment", name).context(name)?;
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["image"], "ghcr.io/gclb-operator/gclb-operator:0.1.0",
            "{name}: kustomization.yaml's images: sets every image"
        );
        assert_eq!(pod["securityContext"]["runAsUser"], 65532, "{name}");
        assert_eq!(
            pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"], true,
            "{name}"
        );
    }
    // High availability: two replicas, never both disrupted at once.
    let operator = find(&objects, "Deployment", "gclb-operator").context("operator")?;
    assert_eq!(operator["spec"]["replicas"], 2);
    let pdb = find(&objects, "PodDisruptionBudget", "gclb-operator").context("no PDB")?;
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        operator["spec"]["selector"]["matchLabels"]
    );
    let cm = config_map(&objects)?;
    let container = operator_container(&objects)?;
    assert_eq!(
        container["envFrom"][0]["configMapRef"]["name"], cm["metadata"]["name"],
        "the Deployment reads the generated (hashed) ConfigMap"
    );
    assert!(cm["data"]["GCLB_TAKEOVER"].is_null());
    let sa = find(&objects, "ServiceAccount", "gclb-operator").context("ServiceAccount")?;
    assert_eq!(
        sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"],
        "gclb-operator@my-project.iam.gserviceaccount.com",
        "Workload Identity's annotation is where kustomize users set it"
    );

    let sys = System::start(&[])?;
    let path = sys.dir.path().join("rendered.yaml");
    std::fs::write(&path, &yaml)?;
    let out = sys.kubectl_ok(&["apply", "-f", path.to_str().unwrap()])?;
    assert!(
        out.contains("deployment.apps/gclb-operator created"),
        "{out}"
    );
    assert!(
        out.contains("ingressclass.networking.k8s.io/gclb created"),
        "{out}"
    );
    assert!(
        out.contains("poddisruptionbudget.policy/gclb-operator created"),
        "{out}"
    );
    Ok(())
}

/// The webhook component: never kube-system nor the operator's own namespace, and the webhook
/// Service selects the operator Pods (every replica serves it).
#[test]
fn webhook_component_skips_system_namespaces() -> Result<()> {
    let objects = objects(&render(&deploy_dir(), &["webhook"])?)?;
    let config = find(
        &objects,
        "MutatingWebhookConfiguration",
        "gclb-operator-neg-readiness-gate",
    )
    .context("no MutatingWebhookConfiguration")?;
    let hook = &config["webhooks"][0];
    let excluded = hook["namespaceSelector"]["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["key"] == "kubernetes.io/metadata.name")
        .context("no namespace exclusion")?;
    assert_eq!(excluded["operator"], "NotIn");
    assert_eq!(
        excluded["values"],
        serde_json::json!(["gclb-operator", "kube-system"])
    );
    let service = find(&objects, "Service", "gclb-operator-webhook").context("Service")?;
    let operator = find(&objects, "Deployment", "gclb-operator").context("operator")?;
    assert_eq!(
        service["spec"]["selector"],
        operator["spec"]["selector"]["matchLabels"]
    );
    let args = operator_container(&objects)?["args"].to_string();
    assert!(args.contains("--webhook-listen=0.0.0.0:9443"), "{args}");
    Ok(())
}

/// The components: takeover serves GKE's class and default backend, the gke-addon component
/// leaves GKE's CRDs and ManagedCertificate controller alone; together they are GKE with the
/// add-on disabled.
#[test]
fn takeover_and_gke_addon_components_render_what_docs_install_md_says() -> Result<()> {
    let takeover = objects(&render(&deploy_dir(), &["components/takeover"])?)?;
    let class = find(&takeover, "IngressClass", "gce").context("no gce IngressClass")?;
    assert_eq!(class["spec"]["controller"], "k8s.io/ingress-gce");
    assert_eq!(
        class["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"],
        "true"
    );
    assert!(find(&takeover, "IngressClass", "gclb").is_none());
    assert!(find(&takeover, "Service", "gclb-default-backend").is_none());
    let backend = find(&takeover, "Service", "default-http-backend").context("GKE's backend")?;
    assert_eq!(backend["metadata"]["namespace"], "kube-system");
    assert_eq!(config_map(&takeover)?["data"]["GCLB_TAKEOVER"], "true");
    let crds = |objects: &[Value]| {
        objects
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .count()
    };
    assert_eq!(crds(&takeover), 4);

    let addon = objects(&render(&deploy_dir(), &["components/gke-addon"])?)?;
    // GKE's three are left as GKE installed them; the project's TLSCertificateDelegation stays.
    assert_eq!(crds(&addon), 1, "GKE's CRDs are left as GKE installed them");
    assert_eq!(
        config_map(&addon)?["data"]["GCLB_MANAGED_CERTIFICATES"],
        "false"
    );
    assert!(find(&addon, "IngressClass", "gclb").is_some());

    let both = objects(&render(
        &deploy_dir(),
        &["components/gke-addon", "components/takeover"],
    )?)?;
    let data = &config_map(&both)?["data"];
    assert_eq!(data["GCLB_TAKEOVER"], "true");
    assert_eq!(data["GCLB_MANAGED_CERTIFICATES"], "false");
    Ok(())
}

/// A settings change gives the ConfigMap a new name and so changes the Deployment's Pod
/// template, which rolls the operator (kustomize's configMapGenerator hash).
#[test]
fn a_settings_change_rolls_the_operator() -> Result<()> {
    let copy = tempfile::tempdir()?;
    let deploy = copy.path().join("deploy");
    for (from, to) in [
        (repo_root().join("deploy"), deploy.clone()),
        (repo_root().join("crds"), copy.path().join("crds")),
    ] {
        let out = Command::new("cp").arg("-r").arg(&from).arg(&to).output()?;
        assert!(out.status.success(), "{out:?}");
    }
    let before = objects(&render(&deploy, &[])?)?;
    let config = deploy.join("config.env");
    let text = std::fs::read_to_string(&config)?;
    std::fs::write(
        &config,
        text.replace("GCLB_NETWORK=default", "GCLB_NETWORK=prod-vpc"),
    )?;
    let after = objects(&render(&deploy, &[])?)?;
    let referenced = |o: &[Value]| -> Result<String> {
        Ok(operator_container(o)?["envFrom"][0]["configMapRef"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    };
    let (old, new) = (referenced(&before)?, referenced(&after)?);
    assert_ne!(old, new, "the Pod template did not change");
    assert_eq!(config_map(&after)?["metadata"]["name"], new.as_str());
    assert_eq!(config_map(&after)?["data"]["GCLB_NETWORK"], "prod-vpc");
    Ok(())
}
