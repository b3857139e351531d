//! Server-rendered HTML of the dashboard: the page shell (inline CSS and a small inline
//! script, no external assets) and the load balancer list, which the script swaps in when the
//! topology changes. Names link to their JSON on the Compute API (`/compute/v1/<key>`).

use std::fmt::Write;

use super::topology::{LoadBalancer, Service};

/// Load balancers shown open at load; with more, every one starts collapsed.
const OPEN_UP_TO: usize = 20;

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A link from a resource key to its JSON, labelled with its kind and name.
fn link(key: &str) -> String {
    if key.is_empty() {
        return "<span class=missing>(none)</span>".into();
    }
    let mut parts = key.rsplit('/');
    let name = parts.next().unwrap_or(key);
    let kind = parts.next().unwrap_or("");
    format!(
        "<a href=\"/compute/v1/{}\" title=\"{}\"><span class=kind>{}</span> {}</a>",
        esc(key),
        esc(key),
        esc(kind),
        esc(name)
    )
}

/// The project link of a key (`projects/P/...`).
fn project_link(key: &str) -> String {
    let p = key.split('/').nth(1).unwrap_or("");
    format!("<a href=\"/compute/v1/projects/{0}\">{0}</a>", esc(p))
}

fn service_html(out: &mut String, bs: &Service) {
    let _ = write!(
        out,
        "<li class=bs data-bs=\"{}\">{} <span class=rate data-rate-bs=\"{}\"></span>",
        esc(&bs.key),
        link(&bs.key),
        esc(&bs.key)
    );
    if let Some(p) = &bs.security_policy {
        let _ = write!(out, " <span class=policy>policy {}</span>", link(p));
    }
    if !bs.health_checked {
        out.push_str(" <span class=note>no health check</span>");
    }
    out.push_str("<ul>");
    for g in &bs.groups {
        let _ = write!(out, "<li>{}<ul class=eps>", link(&g.key));
        for ep in &g.endpoints {
            let _ = write!(
                out,
                "<li class=\"ep {h}\" data-ep=\"{id}\" title=\"{h}\">{a} <span class=state>{h}</span></li>",
                h = esc(&ep.health),
                id = esc(&ep.id),
                a = esc(&ep.address)
            );
        }
        if g.endpoints.is_empty() {
            out.push_str("<li class=note>no endpoints</li>");
        }
        out.push_str("</ul></li>");
    }
    out.push_str("</ul></li>");
}

/// The load balancer list (the part the script replaces when the topology changes).
pub fn load_balancers_html(lbs: &[LoadBalancer], version: u64) -> String {
    let mut out = format!(
        "<div id=lbs data-version={version}><p class=count>{} load balancer(s)</p>",
        lbs.len()
    );
    let open = if lbs.len() <= OPEN_UP_TO { " open" } else { "" };
    for lb in lbs {
        let search = format!(
            "{} {} {} {} {}",
            lb.forwarding_rule,
            lb.address,
            lb.url_map,
            lb.rules
                .iter()
                .map(|r| r.hosts.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            lb.backend_services
                .iter()
                .map(|b| b.key.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        )
        .to_ascii_lowercase();
        let _ = write!(
            out,
            "<details class=lb data-search=\"{}\" data-rule=\"{}\"{open}><summary>{} <span class=addr>{}</span> <span class=rate data-rate-fr=\"{}\"></span> <span class=recent data-recent=\"{}\"></span> <span class=proj>project {}</span></summary>",
            esc(&search),
            esc(&lb.forwarding_rule),
            link(&lb.forwarding_rule),
            esc(&lb.address),
            esc(&lb.forwarding_rule),
            esc(&lb.forwarding_rule),
            project_link(&lb.forwarding_rule)
        );
        let _ = write!(
            out,
            "<div class=chain><div class=step>&rarr; {}",
            link(&lb.target_proxy)
        );
        for c in &lb.certificates {
            let _ = write!(out, " <span class=cert>{}</span>", link(c));
        }
        let _ = write!(
            out,
            "</div><div class=step>&rarr; {}<table class=rules><tr><th>hosts<th>rule<th>matches<th>to</tr>",
            link(&lb.url_map)
        );
        for r in &lb.rules {
            let to = if r.target.starts_with("projects/") {
                link(&r.target)
            } else {
                esc(&r.target)
            };
            let _ = write!(
                out,
                "<tr><td>{}<td>{}<td>{}<td>{}</tr>",
                esc(&r.hosts),
                esc(&r.rule),
                esc(&r.matches),
                to
            );
        }
        out.push_str("</table></div><div class=step>&rarr; <ul class=services>");
        for bs in &lb.backend_services {
            service_html(&mut out, bs);
        }
        out.push_str("</ul></div></div></details>");
    }
    out.push_str("</div>");
    out
}

const STYLE: &str = r#"
body{font:14px system-ui,sans-serif;margin:1em;color:#222}
h1{font-size:18px;margin:0 0 .5em}
a{color:#1a55b0;text-decoration:none}a:hover{text-decoration:underline}
.kind{color:#777;font-size:12px}
#search{width:30em;padding:4px}
details.lb{border:1px solid #ccc;border-radius:4px;margin:.4em 0;padding:.3em .6em}
summary{cursor:pointer}
.addr{font-family:monospace}.proj{color:#777;font-size:12px}
.chain{margin-left:1em}.step{margin:.3em 0}
table.rules{border-collapse:collapse;margin:.2em 0 .2em 1.5em;font-size:12px}
table.rules td,table.rules th{border:1px solid #ddd;padding:2px 6px;text-align:left}
ul{margin:.2em 0;padding-left:1.5em}
ul.eps{list-style:none;padding-left:.5em}
.ep{display:inline-block;margin:2px;padding:2px 8px;border-radius:10px;font-family:monospace;color:#fff}
.ep.HEALTHY{background:#1e8e3e}.ep.UNHEALTHY{background:#d93025}
.ep.DRAINING{background:#f29900}.ep.UNKNOWN,.ep.NOT_CHECKED{background:#80868b}
.rate{color:#555;font-size:12px}.recent{font-family:monospace;font-size:12px}
.s2{color:#1e8e3e}.s3{color:#1a55b0}.s4{color:#f29900}.s5{color:#d93025}
.note,.missing{color:#999;font-size:12px}
#status{font-size:12px;color:#777}
#explain input{width:22em}#explain pre{background:#f6f6f6;padding:.5em;max-height:20em;overflow:auto}
"#;

const SCRIPT: &str = r#"
const base = location.pathname.replace(/\/$/, '');
let eps = {};
function index(){eps={};document.querySelectorAll('[data-ep]').forEach(e=>{(eps[e.dataset.ep]=eps[e.dataset.ep]||[]).push(e);});filter();}
function filter(){const q=document.getElementById('search').value.toLowerCase();
 document.querySelectorAll('details.lb').forEach(d=>{d.style.display=!q||d.dataset.search.includes(q)?'':'none';});}
function setAll(open){document.querySelectorAll('details.lb').forEach(d=>{if(d.style.display!=='none')d.open=open;});}
const es = new EventSource(base + '/events');
es.addEventListener('health', ev => {
  const h = JSON.parse(ev.data);
  for (const id in h) (eps[id]||[]).forEach(e=>{e.className='ep '+h[id];e.title=h[id];e.querySelector('.state').textContent=h[id];});
});
es.addEventListener('stats', ev => {
  const st = JSON.parse(ev.data);
  document.querySelectorAll('[data-rate-fr]').forEach(e=>{const r=st.rules[e.dataset.rateFr];e.textContent=r?r.rate.toFixed(1)+' req/s, '+r.total+' total':'';});
  document.querySelectorAll('[data-rate-bs]').forEach(e=>{const r=st.services[e.dataset.rateBs];e.textContent=r?r.rate.toFixed(1)+' req/s':'';});
  document.querySelectorAll('[data-recent]').forEach(e=>{const c=(st.recent||{})[e.dataset.recent]||[];
    e.innerHTML=c.map(s=>'<span class=s'+String(s)[0]+'>'+s+'</span>').join(' ');});
});
es.addEventListener('topology', ev => {
  const v = JSON.parse(ev.data).version;
  if (String(v) === document.getElementById('lbs').dataset.version) return;
  const open = new Set([...document.querySelectorAll('details.lb[open]')].map(d=>d.dataset.rule));
  fetch(base + '/lbs').then(r=>r.text()).then(html=>{
    const lbs = document.getElementById('lbs'); lbs.outerHTML = html;
    document.querySelectorAll('details.lb').forEach(d=>{if(open.has(d.dataset.rule))d.open=true;});
    index();
  });
});
es.onopen = () => document.getElementById('status').textContent = 'live';
es.onerror = () => document.getElementById('status').textContent = 'reconnecting...';
function explain(form){
  const f = new FormData(form); const headers = {};
  (f.get('headers')||'').split('\n').forEach(l=>{const i=l.indexOf(':');if(i>0)headers[l.slice(0,i).trim().toLowerCase()]=l.slice(i+1).trim();});
  const body = {url:f.get('url'), headers};
  if (f.get('target')) { if (/^[0-9.:a-f\[\]]+$/.test(f.get('target'))) body.ipAddress=f.get('target'); else body.forwardingRule=f.get('target'); }
  fetch(base.replace(/\/dashboard$/, '/explain'), {method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify(body)})
    .then(r=>r.json()).then(j=>{form.querySelector('pre').textContent=JSON.stringify(j,null,2);});
  return false;
}
index();
"#;

/// The whole page.
pub fn page(lbs: &[LoadBalancer], version: u64) -> String {
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>gce-emulator dashboard</title><style>{STYLE}</style></head><body>\
<h1>gce-emulator load balancers <span id=status>connecting...</span></h1>\
<p><input id=search placeholder=\"search rules, addresses, hosts, services\" oninput=\"filter()\"> \
<button onclick=\"setAll(true)\">expand all</button> <button onclick=\"setAll(false)\">collapse all</button> \
<a href=\"/_emulator/state\">state JSON</a> <a href=\"/_emulator/health\">health JSON</a> \
<a href=\"/_emulator/dashboard/iam\">who may do what (IAM)</a></p>\
<details id=explain><summary>explain a request</summary><form onsubmit=\"return explain(this)\">\
<input name=url placeholder=\"http://host/path?query\"> <input name=target placeholder=\"forwarding rule or IP (optional)\"><br>\
<textarea name=headers rows=2 cols=50 placeholder=\"header: value\"></textarea> <button>explain</button><pre></pre></form></details>\
{}<script>{SCRIPT}</script></body></html>",
        load_balancers_html(lbs, version)
    )
}
