"""Admission webhooks and CRD conversion webhooks, as kube-apiserver calls them.

``client`` calls a webhook (URL or Service, TLS with the caBundle, kube's error texts);
``review`` builds AdmissionReviews and checks their answers; ``admission`` holds the
mutating and validating dispatchers; ``conversion`` the CRD conversion webhook.
"""
