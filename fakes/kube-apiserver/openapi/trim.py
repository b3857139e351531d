#!/usr/bin/env python3
"""Regenerates openapi/v3/*.json and openapi/discovery/*.json from the captured v1.36 documents
(/work/shared/reference/kube-api-v1.36/), keeping only the served resources (SERVED below) and
the component schemas their paths reach. Run: python3 openapi/trim.py [REFERENCE_DIR].
discovery/apis_authentication.k8s.io_v1.json and apis_authorization.k8s.io_v1.json are not in
the captured set: they are written by hand from the same server's aggregated discovery
(discovery/apis-aggregated-v2.json there), and this script leaves them alone."""
import json, os, re, sys

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
    "apis_apps_v1": ["deployments", "deployments/status"],
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
