"""Multi-turn agent episodes (OpenRLHF's `AgentInstanceBase` / `AgentExecutor` API)."""
