"""The coordinator: layout store, controller, position service, CLI and dev cluster."""
