"""App-only helpers for the Streamlit shell: cached resources, state keys, URL handling, rendering.

No retrieval logic lives here; it calls `retrieval` and draws what comes back.
"""
