"""Adapters for agent frameworks, each imported on its own so that the package needs
none of them: `wasmbox.integrations.chuk` (chuk-tool-processor) and
`wasmbox.integrations.pydantic_ai` (pydantic-ai)."""
