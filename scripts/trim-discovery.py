#!/usr/bin/env python3
"""Trim the Compute Engine v1 discovery document to what the simulator serves.

The simulator (crates/gce-sim) validates every request body and query parameter against
crates/gce-sim/data/compute.v1.trimmed.json, which this script writes: only the methods listed in
METHODS below, and only the schemas reachable from their request and response types, with
descriptions dropped to keep the embedded copy small.

Getting the full document (revision 20261106 is what the project uses):

    pip download --no-deps google-api-python-client==2.202.0 -d /tmp/gapi
    cd /tmp/gapi && python3 -m zipfile -e google_api_python_client-*.whl x
    # the document is x/googleapiclient/discovery_cache/documents/compute.v1.json

Usage:

    scripts/trim-discovery.py FULL.json > crates/gce-sim/data/compute.v1.trimmed.json
"""

import json
import sys

# resource -> methods the simulator implements.
METHODS = {
    "regionInstanceGroupManagers": ["insert", "get", "list", "delete", "deleteInstances", "listManagedInstances", "createInstances"],
    "instanceGroupManagers": ["insert", "get", "list", "delete", "deleteInstances", "listManagedInstances", "createInstances"],
    "regionInstanceGroupManagerResizeRequests": ["insert", "get", "list", "delete", "cancel"],
    "instanceGroupManagerResizeRequests": ["insert", "get", "list", "delete", "cancel"],
    "instances": ["get", "list", "aggregatedList", "reportHostAsFaulty"],
    "machineTypes": ["get"],
    "instanceTemplates": ["get"],
    "regionInstanceTemplates": ["get"],
    "zoneOperations": ["get", "wait"],
    "regionOperations": ["get", "wait"],
    "globalOperations": ["get", "wait"],
    "resourcePolicies": ["insert", "get", "list", "delete"],
    "advice": ["capacity"],
    "reservations": ["get", "list", "aggregatedList"],
    "reservationBlocks": ["get", "list"],
    "reservationSubBlocks": ["get", "list"],
    "futureReservations": ["get", "list", "aggregatedList"],
}

DROP_KEYS = {"description", "enumDescriptions", "enumDeprecated", "icons", "documentationLink"}


def strip(node):
    """Drop documentation-only keys everywhere below node.

    Only documentation *values* go (strings and lists of strings): a schema property that happens to
    be called `description` is an object and stays.
    """
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k not in DROP_KEYS or isinstance(v, dict)}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def refs(node, out):
    """Collect every $ref below node."""
    if isinstance(node, dict):
        if "$ref" in node:
            out.add(node["$ref"])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def main():
    full = json.load(open(sys.argv[1]))
    resources = {}
    wanted = set()
    for res, names in METHODS.items():
        methods = {}
        for name in names:
            method = full["resources"][res]["methods"][name]
            methods[name] = method
            refs(method, wanted)
        resources[res] = {"methods": methods}
    schemas = {}
    todo = sorted(wanted)
    while todo:
        name = todo.pop()
        if name in schemas:
            continue
        schemas[name] = full["schemas"][name]
        more = set()
        refs(schemas[name], more)
        todo.extend(sorted(more - set(schemas)))
    out = {
        "kind": full["kind"],
        "id": full["id"],
        "name": full["name"],
        "version": full["version"],
        "revision": full["revision"],
        "rootUrl": full["rootUrl"],
        "servicePath": full["servicePath"],
        "parameters": full["parameters"],
        "resources": resources,
        "schemas": dict(sorted(schemas.items())),
    }
    json.dump(strip(out), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
