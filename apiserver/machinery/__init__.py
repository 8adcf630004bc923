"""The REST machinery: verbs over storage, field validation, managed fields, patches,
negotiation and protobuf, authentication and authorization (above ``apiserver.storage``)."""
