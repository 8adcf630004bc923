"""client-go's ``tools/cache`` for Overseer: store and indexers, reflector, shared
informers, the informer factory and listers."""
