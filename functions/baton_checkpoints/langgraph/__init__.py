"""`baton_checkpoints.langgraph`: a LangGraph checkpointer kept in Baton (`pip install 'baton-checkpoints[langgraph]'`).

    from baton_checkpoints.langgraph import BatonSaver

    graph = builder.compile(checkpointer=BatonSaver())  # BATON_URL, BATON_API_KEY

It speaks the threads routes of the API over HTTPS through the SDK's transport (`baton_checkpoints.client`) and imports
nothing of the server.
"""

from baton_checkpoints.langgraph.saver import BatonSaver

__all__ = ["BatonSaver"]
