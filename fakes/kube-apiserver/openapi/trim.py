#!/usr/bin/env python3
"""Regenerates openapi/v3/*.json and openapi/discovery/*.json from the captured v1.36 documents
(/work/shared/reference/kube-api-v1.36/), keeping only the served resources (SERVED below) and
the component schemas their paths reach. Run: python3 openapi/trim.py [REFERENCE_DIR].
discovery/apis_authentication.k8s.io_v1.json and apis_authorization.k8s.io_v1.json are not in
the captured set: they are written by hand from the same server's aggregated discovery
(discovery/apis-aggregated-v2.json there), and this script leaves them alone. policy/v1 is not
in the captured v3 set either: FROM_V2 below converts it from the same server's openapi-v2.json
(pass --skip-v2 as the second argument to leave it alone)."""
import glob, json, os, re, sys

REF = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/reference/kube-api-v1.36"
HERE = os.path.dirname(os.path.abspath(__file__))
# group-version file stem -> served resources (subresources included by name).
SERVED = {
    "api_v1": ["configmaps", "endpoints", "events", "namespaces", "namespaces/status", "pods",
               "pods/status", "secrets", "serviceaccounts", "serviceaccounts/token", "services",
               "services/status", "nodes", "nodes/status"],
    "apis_apiextensions.k8s.io_v1": ["customresourcedefinitions", "customresourcedefinitions/status"],
    "apis_coordination.k8s.io_v1": ["leases"],
    "apis_discovery.k8s.io_v1": ["endpointslices"],
    "apis_events.k8s.io_v1": ["events"],
    "apis_networking.k8s.io_v1": ["ingresses", "ingresses/status", "ingressclasses"],
    "apis_apps_v1": ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
                     "deployments/scale", "deployments/status", "replicasets",
                     "replicasets/scale", "replicasets/status", "statefulsets",
                     "statefulsets/scale", "statefulsets/status"],
    "apis_rbac.authorization.k8s.io_v1": ["clusterrolebindings", "clusterroles", "rolebindings", "roles"],
    "apis_admissionregistration.k8s.io_v1": ["mutatingwebhookconfigurations",
                                             "validatingwebhookconfigurations"],
}

def resource_of(path):
    """'/apis/g/v/namespaces/{namespace}/pods/{name}/status' -> 'pods/status' ('' for the root)."""
    parts = [p for p in path.split("/") if p]
    parts = parts[2:] if parts[0] == "api" else parts[3:]
    if parts and parts[0] == "watch":
        parts = parts[1:]
    if len(parts) >= 2 and parts[0] == "namespaces" and parts[1] == "{namespace}":
        parts = parts[2:]
    if not parts:
        return ""
    res = parts[0]
    if len(parts) >= 3 and parts[1] == "{name}":
        res += "/" + parts[2]
    return res

def refs(node, out):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str):
            out.add(r.rsplit("/", 1)[-1])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)

for stem, served in SERVED.items():
    doc = json.load(open(f"{REF}/v3/{stem}.json"))
    doc["paths"] = {p: v for p, v in doc["paths"].items()
                    if resource_of(p) == "" or resource_of(p) in served}
    schemas = doc["components"]["schemas"]
    keep, todo = set(), set()
    refs(doc["paths"], todo)
    while todo:
        name = todo.pop()
        if name in keep or name not in schemas:
            continue
        keep.add(name)
        refs(schemas[name], todo)
    doc["components"]["schemas"] = {k: v for k, v in schemas.items() if k in keep}
    json.dump(doc, open(f"{HERE}/v3/{stem}.json", "w"), separators=(",", ":"))
    disc = json.load(open(f"{REF}/discovery/{stem}.json"))
    disc["resources"] = [r for r in disc["resources"] if r["name"] in served]
    json.dump(disc, open(f"{HERE}/discovery/{stem}.json", "w"), separators=(",", ":"))

# OpenAPI v2 (`/openapi/v2`): the same served resources, plus the review and token kinds this
# server answers, and the definitions and shared parameters their paths reach.
V2_EXTRA = {
    "apis_authorization.k8s.io_v1": ["selfsubjectaccessreviews", "subjectaccessreviews",
                                     "localsubjectaccessreviews", "selfsubjectrulesreviews"],
    "apis_authentication.k8s.io_v1": ["tokenreviews", "selfsubjectreviews"],
    # A real server's /openapi/v2 documents policy/v1 too (clients that still read v2 need it).
    "apis_policy_v1": ["poddisruptionbudgets", "poddisruptionbudgets/status"],
}

def stem_of(path):
    """'/apis/g/v/...' -> 'apis_g_v'; '/api/v1/...' -> 'api_v1'; group roots -> None."""
    parts = [p for p in path.split("/") if p]
    if parts[0] == "api":
        return "api_v1" if len(parts) >= 2 else None
    return f"apis_{parts[1]}_{parts[2]}" if len(parts) >= 3 else None

v2 = json.load(open(f"{REF}/openapi-v2.json"))
served_v2 = {**SERVED, **V2_EXTRA}
v2["paths"] = {p: v for p, v in v2["paths"].items()
               if stem_of(p) in served_v2
               and (resource_of(p) == "" or resource_of(p) in served_v2[stem_of(p)])}
keep, todo = set(), set()
refs(v2["paths"], todo)
while todo:
    name = todo.pop()
    if name in keep or name not in v2["definitions"]:
        continue
    keep.add(name)
    refs(v2["definitions"][name], todo)
v2["definitions"] = {k: v for k, v in v2["definitions"].items() if k in keep}
used = set()
refs(v2["paths"], used)
v2["parameters"] = {k: v for k, v in v2["parameters"].items() if k in used}
json.dump(v2, open(f"{HERE}/v2.json", "w"), separators=(",", ":"))
# Group versions the captured v3 set lacks, converted from the same server's openapi-v2.json
# (definitions -> components/schemas, body parameters -> requestBody, typed parameters ->
# schema), with a legacy discovery document written from its aggregated discovery entry.
FROM_V2 = {
    # stem: (group, version, served resources)
    "apis_policy_v1": ("policy", "v1", ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
}

def v3_refs(node):
    if isinstance(node, dict):
        return {k: (v.replace("#/definitions/", "#/components/schemas/")
                    if k == "$ref" and isinstance(v, str) else v3_refs(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [v3_refs(v) for v in node]
    return node

V2_PARAMETERS = {}

def v3_parameter(p):
    if "$ref" in p:
        p = V2_PARAMETERS[p["$ref"].rsplit("/", 1)[-1]]
    p = v3_refs(p)
    out = {k: p[k] for k in ("name", "in", "description", "required") if k in p}
    schema = {k: p[k] for k in ("type", "uniqueItems", "format", "items") if k in p}
    out["schema"] = schema
    return out

def v3_operation(op, produces):
    op = dict(op)
    params, body = [], None
    consumes = op.get("consumes", ["*/*"])
    for p in op.pop("parameters", []):
        if "$ref" in p:
            p = V2_PARAMETERS[p["$ref"].rsplit("/", 1)[-1]]
        if p.get("in") == "body":
            schema = v3_refs(p["schema"])
            body = {"content": {t: {"schema": schema} for t in consumes}, "required": True}
        else:
            params.append(v3_parameter(p))
    if params:
        op["parameters"] = params
    if body:
        op["requestBody"] = body
    types = op.pop("produces", produces)
    op.pop("consumes", None)
    op.pop("schemes", None)
    responses = {}
    for code, r in op.get("responses", {}).items():
        r = v3_refs(r)
        out = {"description": r.get("description", "")}
        if "schema" in r:
            out["content"] = {t: {"schema": r["schema"]} for t in types}
        responses[code] = out
    op["responses"] = responses
    return op

if len(sys.argv) <= 2 or sys.argv[2] != "--skip-v2":
    v2 = json.load(open(f"{REF}/openapi-v2.json"))
    V2_PARAMETERS.update(v2.get("parameters", {}))
    aggregated = json.load(open(f"{REF}/discovery/apis-aggregated-v2.json"))
    for stem, (group, version, served) in FROM_V2.items():
        prefix = f"/apis/{group}/{version}"
        paths = {}
        for path, item in v2["paths"].items():
            if not (path == prefix + "/" or path.startswith(prefix + "/")):
                continue
            if resource_of(path) not in ("", *served):
                continue
            out = {}
            for key, value in item.items():
                if key == "parameters":
                    out["parameters"] = [v3_parameter(p) for p in value]
                else:
                    out[key] = v3_operation(value, ["application/json"])
            paths[path] = out
        keep, todo = set(), set()
        refs(paths, todo)
        schemas = {k: v3_refs(v) for k, v in v2["definitions"].items()}
        while todo:
            name = todo.pop()
            if name in keep or name not in schemas:
                continue
            keep.add(name)
            refs(schemas[name], todo)
        # Definitions the captured v3 documents also have keep their v3 form: v2 flattens
        # IntOrString and Quantity to `type: string`, and the server resolves a name once for
        # every document, so a v2 form would refuse `targetPort: 8080` on a Service.
        for other in glob.glob(f"{HERE}/v3/*.json"):
            if other.endswith(f"/{stem}.json"):
                continue
            for k, v in json.load(open(other)).get("components", {}).get("schemas", {}).items():
                if k in keep:
                    schemas[k] = v
        doc = {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": v2["info"]["version"]},
               "paths": paths,
               "components": {"schemas": {k: v for k, v in schemas.items() if k in keep}}}
        json.dump(doc, open(f"{HERE}/v3/{stem}.json", "w"), separators=(",", ":"))
        entry = next(g for g in aggregated["items"] if g["metadata"]["name"] == group)
        resources = []
        for r in next(v for v in entry["versions"] if v["version"] == version)["resources"]:
            base = {"name": r["resource"], "singularName": r.get("singularResource", ""),
                    "namespaced": r["scope"] == "Namespaced", "kind": r["responseKind"]["kind"],
                    "verbs": r["verbs"]}
            if r.get("shortNames"):
                base["shortNames"] = r["shortNames"]
            resources.append(base)
            for s in r.get("subresources", []):
                resources.append({"name": f"{r['resource']}/{s['subresource']}", "singularName": "",
                                  "namespaced": r["scope"] == "Namespaced",
                                  "kind": s["responseKind"]["kind"], "verbs": s["verbs"]})
        disc = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}",
                "resources": [r for r in resources if r["name"] in served]}
        json.dump(disc, open(f"{HERE}/discovery/{stem}.json", "w"), separators=(",", ":"))
