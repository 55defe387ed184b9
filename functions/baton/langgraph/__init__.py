"""`baton.langgraph`: a LangGraph checkpointer kept in Baton (`pip install 'baton[langgraph]'`).

    from baton.langgraph import BatonSaver

    graph = builder.compile(checkpointer=BatonSaver())  # BATON_URL, BATON_API_KEY

It speaks the threads routes of the API over HTTPS through the SDK's transport (`baton.client`) and imports
nothing of the server.
"""

from baton.langgraph.saver import BatonSaver

__all__ = ["BatonSaver"]
