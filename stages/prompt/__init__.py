"""The system prompt and what fills it: identity, context files, skills, memory, injection
screening."""
