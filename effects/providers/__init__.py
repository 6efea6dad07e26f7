"""The provider adapters (OpenAI chat, OpenAI Responses, Anthropic Messages) over one HTTP shell."""
