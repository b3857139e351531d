//! deploy/iam/gclb-operator-role.yaml proven exact, permission by permission (issue 43).
//!
//! Against the emulator run with `--iam`, the operator authenticated through the metadata
//! server as a Google service account bound to exactly the role (custom role `underTest`),
//! every scenario of tests/support/iam_scenarios.rs (HTTP with a Cloud Armor allow-list,
//! HTTPS with a Secret and a pre-shared certificate, FrontendConfig and BackendConfig
//! features, a static global address, the internal and regional external classes, a Gateway)
//! is applied until it serves, changed until the change is served (the update phase,
//! tests/support/iam_updates.rs: what makes the operator call the set*/update methods) and
//! deleted until collected, with no refusal. The emulator's
//! usage counters, reset between phases, record which permissions each phase checked.
//!
//! The removal proof: for a permission some phase exercised, the role is redefined without
//! it (the emulator applies a role change to the next call) and that phase runs again with a
//! fresh namespace (fresh names: the operator's backoff after earlier refusals does not
//! matter). It must be refused, that permission and no other, and the object must say so: a
//! Warning `PermissionDenied` Event naming it on the Ingress, or the Gateway's `Programmed`
//! condition naming it. A delete-phase permission is removed after a create with the whole
//! role. The role is then restored and the run collected before the next.
//!
//! Every scenario also passes with the predefined roles docs/install.md offers instead
//! (Compute Load Balancer Admin + Compute Security Admin, and Network Services Admin for the
//! Gateway's TLSRoute).
//!
//! The table (permission -> phases that exercised it, where its removal was refused, or why no
//! test reaches it) is compared with deploy/iam/permission-report.md; `IAM_REPORT_WRITE=1`
//! rewrites it. `IAM_REPORT=full` (`make iam-report`) removes every exercised permission;
//! without it (`make test`) the scenarios run with the whole role and a few removals
//! ([`FAST_REMOVALS`]) are checked against their rows of the committed report. A full run can
//! be split over processes, each with its own stack: `IAM_REPORT_SHARD=0/2` and `1/2` with one
//! fresh `IAM_REPORT_SHARD_DIR` (tests/support/iam_report.rs `shard`); the last to finish
//! writes the report.

#[path = "support/iam_report.rs"]
mod iam_report;
#[path = "support/iam_scenarios.rs"]
mod iam_scenarios;
#[path = "support/iam_updates.rs"]
mod iam_updates;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use iam_report::{diff, proof, render, verdicts, Phase, Row, TIMING, UNREACHED};
use iam_scenarios::{Scenario, ALL};
use reqwest::Method;
use support::iam::{role_permissions, start_with_operator_account, Counts, SLOW_OPERATIONS};
use support::*;

const MEMBER: &str = "serviceAccount:gclb-operator@p1.iam.gserviceaccount.com";
const ROLE_ID: &str = "underTest";
const REPORT: &str = "deploy/iam/permission-report.md";
/// How long a removal run waits, after the phase completed, for a refusal by what runs beside
/// it (health polling, garbage collection), and after a refusal for the object to say so.
const GRACE: std::time::Duration = std::time::Duration::from_secs(15);

/// Removals `make test` runs (one create-phase, one delete-phase, one HTTPS, one regional).
const FAST_REMOVALS: &[&str] = &[
    "compute.backendServices.create",
    "compute.urlMaps.delete",
    "compute.sslCertificates.create",
    "compute.regionTargetHttpsProxies.create",
];

/// The predefined roles docs/install.md offers instead of the custom role.
/// Network Services Admin because the Gateway scenario's TLS passthrough listener is a
/// TLSRoute, which no Compute role may write (docs/install.md).
const PREDEFINED: &[&str] = &[
    "roles/compute.loadBalancerAdmin",
    "roles/compute.securityAdmin",
    "roles/networkservices.admin",
];

/// One stack: emulator with `--iam`, local API, the operator bound to [`ROLE_ID`].
struct Stack {
    sys: System,
    /// Whether the operator runs with `--gateway-api`.
    gateway: bool,
    /// The Compute resources before any run (the network's defaults, what the admin made).
    baseline: Vec<String>,
    runs: u32,
}

impl Stack {
    fn start(gateway: bool) -> Result<Stack> {
        let mut sys = start_with_operator_account(&["--slow-cloud", SLOW_OPERATIONS])?;
        sys.define_role(ROLE_ID, &role_permissions()?)?;
        sys.bind(Method::POST, MEMBER, &role_name())?;
        iam_scenarios::prepare(&sys, gateway)?;
        sys.start_operator(if gateway { &["--gateway-api"] } else { &[] })?;
        let baseline = sys.project_resources()?;
        Ok(Stack {
            sys,
            gateway,
            baseline,
            runs: 0,
        })
    }

    /// Stops the operator and starts a new process (empty caches).
    fn restart_operator(&mut self) -> Result<()> {
        self.sys.stop_operator();
        let args: &[&str] = if self.gateway {
            &["--gateway-api"]
        } else {
            &[]
        };
        self.sys.start_operator(args)
    }

    fn fresh_ns(&mut self, sc: Scenario) -> String {
        self.runs += 1;
        format!("iam-{}-{}", sc.name(), self.runs)
    }

    fn usage(&self, reset: bool) -> Result<BTreeMap<String, Counts>> {
        self.sys.iam_usage(MEMBER, reset)
    }

    fn collected(&self, sc: Scenario, ns: &str) -> Result<bool> {
        Ok(sc.object_gone(&self.sys, ns)? && self.sys.project_resources()? == self.baseline)
    }

    /// Runs `phase` of `sc` in `ns` until it completes, or, with `removed`, until the emulator
    /// refused `removed`. `Ok(None)`: completed (with `removed`, and no refusal of it within
    /// [`GRACE`] after: what runs beside the phase, such as health polling, counts too);
    /// `Ok(Some(told))`: refused, and how the object said so (waited for up to [`GRACE`]).
    ///
    /// The delete phase of a scenario that [`Scenario::deleted_while_stopped`] deletes its
    /// object while the operator is stopped and starts a new process, which must collect it
    /// (its finalizer holds the object meanwhile).
    fn phase(
        &mut self,
        sc: Scenario,
        ns: &str,
        phase: Phase,
        removed: Option<&str>,
    ) -> Result<Option<Option<&'static str>>> {
        match phase {
            Phase::Create => self.sys.apply(&sc.manifest(ns)?).map(drop)?,
            Phase::Update => sc.update(&self.sys, ns)?,
            Phase::Delete if sc.deleted_while_stopped() => {
                self.sys.stop_operator();
                sc.delete(&self.sys, ns)?;
                self.restart_operator()?;
            }
            Phase::Delete => sc.delete(&self.sys, ns)?,
        }
        let sys = &self.sys;
        let what = format!(
            "{} {} in {ns} (without {removed:?})",
            sc.name(),
            phase.name()
        );
        let mut refused_at: Option<Instant> = None;
        let mut done_at: Option<Instant> = None;
        wait_for(&what, DEADLINE, || {
            if done_at.is_none() {
                let done = match phase {
                    Phase::Create => sc.serves(sys, ns)?,
                    Phase::Update => sc.updated(sys, ns)?,
                    Phase::Delete => self.collected(sc, ns)?,
                };
                if done {
                    done_at = Some(Instant::now());
                }
            }
            let Some(p) = removed else {
                return Ok(done_at.map(|_| None));
            };
            if refused_at.is_none() && self.usage(false)?.get(p).is_some_and(|c| c.1 > 0) {
                refused_at = Some(Instant::now());
            }
            match (refused_at, done_at) {
                (Some(t), _) => match sc.told(sys, ns, p)? {
                    Some(how) => Ok(Some(Some(Some(how)))),
                    None if t.elapsed() > GRACE => Ok(Some(Some(None))),
                    None => Ok(None),
                },
                (None, Some(t)) if t.elapsed() > GRACE => Ok(Some(None)),
                _ => Ok(None),
            }
        })
        .with_context(|| format!("{what}\n{}", sys.logs()))
    }

    /// Deletes the run in `ns` (its object if still there, then the namespace) and waits until
    /// the project is back to the baseline, touching the object so that a backed-off cleanup
    /// runs now. What the operator leaves behind once its object is gone (a leak: the report
    /// names it) is deleted by the admin after [`GRACE`] and returned, so the next run starts
    /// clean; the operator is then restarted, so that its state cache (lists reused for up to
    /// five minutes) does not hold what the admin deleted behind its back, such as the default
    /// backend's NEG that every Ingress shares.
    fn clean_up(&mut self, sc: Scenario, ns: &str) -> Result<Vec<String>> {
        let sys = &self.sys;
        if !sc.object_gone(sys, ns)? {
            sc.delete(sys, ns)?;
        }
        let mut n = 0;
        let mut last = Instant::now();
        let mut gone_at: Option<Instant> = None;
        let left = wait_for(&format!("{ns} collected"), DEADLINE, || {
            if self.collected(sc, ns)? {
                return Ok(Some(vec![]));
            }
            if sc.object_gone(sys, ns)? {
                let t = *gone_at.get_or_insert_with(Instant::now);
                if t.elapsed() > GRACE {
                    let left: Vec<String> = sys
                        .project_resources()?
                        .into_iter()
                        .filter(|r| !self.baseline.contains(r))
                        .collect();
                    return Ok(Some(left));
                }
            } else if last.elapsed().as_secs() >= 5 {
                n += 1;
                sc.touch(sys, ns, n)?;
                last = Instant::now();
            }
            Ok(None)
        })
        .with_context(|| {
            let left = sys.project_resources().unwrap_or_default();
            format!("left: {left:?}\n{}", sys.logs())
        })?;
        iam_scenarios::admin_delete(sys, &left)?;
        sys.kubectl_ok(&["delete", "namespace", ns, "--wait=false"])?;
        if !left.is_empty() {
            self.restart_operator()?;
        }
        Ok(left)
    }
}

fn role_name() -> String {
    format!("projects/{PROJECT}/roles/{ROLE_ID}")
}

/// The phases of `sc`, in order: create, update (when it has one), delete.
fn phases(sc: Scenario) -> Vec<Phase> {
    let mut out = vec![Phase::Create];
    if sc.has_update() {
        out.push(Phase::Update);
    }
    out.push(Phase::Delete);
    out
}

/// What a scenario's phases checked with the whole role: (scenario, phase) -> permissions.
type Exercised = BTreeMap<(usize, Phase), BTreeSet<String>>;

/// Runs `sc` with the whole role: create until it serves, update until the change is served
/// (tests/support/iam_updates.rs), delete until collected; records each
/// phase's checked permissions. Fails on any refusal.
fn with_whole_role(st: &mut Stack, i: usize, sc: Scenario, out: &mut Exercised) -> Result<()> {
    let ns = st.fresh_ns(sc);
    for phase in phases(sc) {
        st.usage(true)?;
        let t = Instant::now();
        if st.phase(sc, &ns, phase, None)?.is_some() {
            bail!(
                "{} {} was refused with the whole role",
                sc.name(),
                phase.name()
            );
        }
        let u = st.usage(true)?;
        let denied: Vec<&String> = u.iter().filter(|(_, c)| c.1 > 0).map(|(p, _)| p).collect();
        if !denied.is_empty() {
            bail!(
                "{} {}: refused with exactly the role: {denied:?}",
                sc.name(),
                phase.name()
            );
        }
        println!(
            "{} {}: {} permissions, {:.1} s",
            sc.name(),
            phase.name(),
            u.len(),
            t.elapsed().as_secs_f64()
        );
        out.insert((i, phase), u.into_keys().collect());
    }
    st.sys
        .kubectl_ok(&["delete", "namespace", &ns, "--wait=false"])
        .map(drop)
}

/// The outcome of removing one permission: `Ok(told)` it was refused, and how the object said
/// so (and what the operator left behind, if anything); `Err` what went wrong.
///
/// With `restart`, the operator is restarted once the permission is removed (and again once
/// it is back), for a check a process makes once: the state cache's first list of a
/// collection.
fn remove_one(
    st: &mut Stack,
    sc: Scenario,
    phase: Phase,
    p: &str,
    restart: bool,
) -> Result<String> {
    let all = role_permissions()?;
    let without: Vec<String> = all.iter().filter(|q| *q != p).cloned().collect();
    let ns = st.fresh_ns(sc);
    if phase != Phase::Create && st.phase(sc, &ns, Phase::Create, None)?.is_some() {
        bail!("{} create refused with the whole role", sc.name());
    }
    st.sys.define_role(ROLE_ID, &without)?;
    st.usage(true)?;
    if restart {
        st.restart_operator()?;
    }
    let outcome = st.phase(sc, &ns, phase, Some(p));
    let u = st.usage(true);
    st.sys.define_role(ROLE_ID, &all)?;
    if restart {
        st.restart_operator()?;
    }
    let left = st.clean_up(sc, &ns)?;
    let Some(told) = outcome? else {
        bail!("{} {} completed without {p}", sc.name(), phase.name());
    };
    let told = match (told, left.is_empty()) {
        (t, true) => t.unwrap_or("no Event: only the operator's log says so").to_string(),
        (t, false) => format!(
            "{}; once the role was back and the {} deleted, the operator left {} (deleted by the test)",
            t.unwrap_or("no Event"),
            sc.kind(),
            left.join(", ")
        ),
    };
    let denied: Vec<String> = u?
        .into_iter()
        .filter(|(_, c)| c.1 > 0)
        .map(|(q, _)| q)
        .collect();
    if denied != [p.to_string()] {
        bail!("without {p}, refused: {denied:?}");
    }
    Ok(told)
}

#[test]
fn every_permission_of_the_role_is_needed_by_a_scenario() -> Result<()> {
    let full = std::env::var("IAM_REPORT").is_ok_and(|v| v == "full");
    let shard = iam_report::shard();
    let started = Instant::now();
    let role = role_permissions()?;
    let mut exercised: Exercised = BTreeMap::new();
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut removals = 0;
    // IAM_REPORT_SCENARIOS=gateway,http: only those (to debug one; the report is not compared).
    let only = std::env::var("IAM_REPORT_SCENARIOS").ok();
    let chosen = |s: Scenario| {
        only.as_ref()
            .is_none_or(|o| o.split(',').any(|n| n == s.name()))
    };
    for gateway in [false, true] {
        let mine: Vec<(usize, Scenario)> = ALL
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, s)| (*s == Scenario::Gateway) == gateway && chosen(*s))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let mut st = Stack::start(gateway)?;
        for (i, sc) in &mine {
            with_whole_role(&mut st, *i, *sc, &mut exercised)?;
        }
        // docs/install.md's alternative: the two predefined roles instead of the custom one.
        st.sys.bind(Method::DELETE, MEMBER, &role_name())?;
        for r in PREDEFINED {
            st.sys.bind(Method::POST, MEMBER, r)?;
        }
        let mut ignored = Exercised::new();
        for (i, sc) in &mine {
            with_whole_role(&mut st, *i, *sc, &mut ignored)
                .with_context(|| format!("with {PREDEFINED:?} instead of the custom role"))?;
        }
        for r in PREDEFINED {
            st.sys.bind(Method::DELETE, MEMBER, r)?;
        }
        st.sys.bind(Method::POST, MEMBER, &role_name())?;
        for p in &role {
            // The create phases that checked it, then the delete phases, in scenario order: the
            // first whose run without it is refused proves it (a check made once, such as the
            // first garbage collection's list, may not recur in another run of the same phase).
            let mut candidates: Vec<(Scenario, Phase)> = Vec::new();
            for ph in [Phase::Create, Phase::Update, Phase::Delete] {
                for (i, sc) in &mine {
                    if exercised.get(&(*i, ph)).is_some_and(|s| s.contains(p)) {
                        candidates.push((*sc, ph));
                    }
                }
            }
            if candidates.is_empty()
                || TIMING.iter().any(|(q, _)| q == p)
                || rows.get(p).is_some_and(|r| r.proof.starts_with("refused"))
                || (!full && !FAST_REMOVALS.contains(&p.as_str()))
                || shard
                    .is_some_and(|(i, n)| role.iter().position(|q| q == p).unwrap_or(0) % n != i)
            {
                continue;
            }
            let mut failures = Vec::new();
            let mut proven = None;
            // Then the first again with the operator restarted without it (a check made once
            // per process).
            let first = candidates[0];
            let tries = candidates
                .into_iter()
                .take(3)
                .map(|c| (c, false))
                .chain([(first, true)]);
            for ((sc, phase), restart) in tries {
                let t = Instant::now();
                // A failed removal is reported in its row (and fails the test below), so one
                // run shows every permission that is not proven.
                match remove_one(&mut st, sc, phase, p, restart) {
                    Ok(told) => {
                        println!(
                            "without {p}: refused in {} {} ({:.1} s)",
                            sc.name(),
                            phase.name(),
                            t.elapsed().as_secs_f64()
                        );
                        let told = match restart {
                            true => format!("{told} (a check made once per operator process: proven with the operator restarted without it)"),
                            false => told,
                        };
                        proven = Some(proof(sc, phase, &told));
                    }
                    Err(e) => {
                        let why = format!("{e:#}");
                        eprintln!("removing {p} ({} {}): {why}", sc.name(), phase.name());
                        let first = why.lines().next().unwrap_or_default().replace('|', "/");
                        failures.push(format!("{}/{}: {first}", sc.name(), phase.name()));
                    }
                }
                removals += 1;
                if proven.is_some() {
                    break;
                }
            }
            let proof = proven.unwrap_or_else(|| format!("NOT PROVEN: {}", failures.join("; ")));
            rows.insert(
                p.clone(),
                Row {
                    exercised: vec![],
                    proof,
                },
            );
        }
    }
    let used: BTreeSet<&String> = exercised.values().flatten().collect();
    let outside: Vec<&&String> = used.iter().filter(|p| !role.contains(p)).collect();
    assert!(outside.is_empty(), "checked outside the role: {outside:?}");
    let reasons: BTreeMap<&str, &str> = UNREACHED.iter().copied().collect();
    for p in &role {
        let ex: Vec<String> = exercised
            .iter()
            .filter(|(_, s)| s.contains(p))
            .map(|((i, ph), _)| format!("{}/{}", ALL[*i].name(), ph.name()))
            .collect();
        let row = rows.entry(p.clone()).or_insert(Row {
            exercised: vec![],
            proof: String::new(),
        });
        if let Some((_, why)) = TIMING.iter().find(|(q, _)| q == p) {
            row.proof = format!("timing-dependent, not removed: {why}");
            row.exercised = vec!["(varies)".into()];
            continue;
        }
        if ex.is_empty() {
            row.proof = match reasons.get(p.as_str()) {
                Some(r) => format!("not reached: {r}"),
                None => format!("not reached: NO REASON GIVEN (add {p} to UNREACHED)"),
            };
        } else if reasons.contains_key(p.as_str()) {
            row.proof = format!("UNREACHED lists it, yet {} checked it", ex.join(", "));
        }
        row.exercised = ex;
    }
    println!(
        "{} permissions exercised, {removals} removals, {:.0} s in all",
        used.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some((i, n)) = shard {
        match iam_report::merge_shards(i, n, &render(&rows), &role)? {
            Some(merged) => rows = merged,
            None => {
                println!("shard {i}/{n} written; the last shard to finish writes the report");
                return Ok(());
            }
        }
    }
    let text = render(&rows);
    if only.is_some() {
        println!("{text}");
        return Ok(());
    }
    let path = repo_root().join(REPORT);
    let unproven: Vec<&String> = rows
        .iter()
        .filter(|(_, r)| {
            r.proof.contains("NOT PROVEN")
                || r.proof.contains("NO REASON")
                || r.proof.contains("UNREACHED lists")
        })
        .map(|(p, _)| p)
        .collect();
    if full && std::env::var("IAM_REPORT_WRITE").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &text)?;
        assert!(
            unproven.is_empty(),
            "not proven (see {REPORT}): {unproven:?}"
        );
        return Ok(());
    }
    assert!(unproven.is_empty(), "not proven:\n{text}");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let how = "regenerate with `make iam-report IAM_REPORT_WRITE=1` (IAM_REPORT=full IAM_REPORT_WRITE=1 cargo nextest run --profile iam-report --test iam_permission_report_e2e)";
    // Which phase first checks a permission, and so proves it, can change from run to run
    // (garbage collection's lists fall in one phase or the next): compared is each row's
    // verdict, the phases are the writing run's. A full run: every verdict equal. `make test`:
    // what it decided (exercised or not; the fast removals refused).
    let (theirs, mine) = (verdicts(&committed), verdicts(&text));
    let mut wrong = Vec::new();
    for (p, v) in &mine {
        let c = theirs.get(p).copied().unwrap_or("(no row)");
        let agree = match full {
            true => c == *v,
            false if *v == "exercised" => c == "refused" || c.starts_with("timing"),
            false => c == *v,
        };
        if !agree {
            wrong.push(format!("{p}: committed {c:?}, this run {v:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{REPORT} disagrees with this run; {how}\n{}\n{}",
        wrong.join("\n"),
        diff(&committed, &text)
    );
    Ok(())
}
