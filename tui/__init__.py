"""The kb terminal app (Textual). It calls `kb` only; `kb` never imports it."""
