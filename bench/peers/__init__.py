"""The peers Overseer is compared with, each doing the exposer's job in its own process.

* :mod:`bench.peers.official_exposer`: the official client's
  ``kubernetes.informer.SharedInformer`` + a de-duplicating queue + worker threads, writes
  through the typed client;
* :mod:`bench.peers.kopf_exposer`: a kopf operator (``kopf run``), writes through the
  official client from kopf's handler threads.

Both build the same objects (:mod:`bench.peers.desired`): for a Deployment annotated
``overseer.io/expose: "true"``, a Service named like it (selector = its matchLabels, one
port per container port) and an Ingress (host ``{name}.{namespace}.{domain}``), both
owned by the Deployment, the URL as the Ingress's ``overseer.io/exposed-url`` annotation
(Overseer's default: nothing is written to the Deployment).
"""
