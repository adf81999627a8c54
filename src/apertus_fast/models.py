"""The reference package's ``apertus_format.models`` module: the drop-in dataclasses.

``from apertus_format.models import Message`` keeps working after
:func:`apertus_fast.install_as_apertus_format` (the objects are ``apertus_fast.Message``, ...).
"""

from ._models import (  # (Role and BlockType: the reference's models module imports them)
    AssistantBlock,
    BlockType,
    Role,
    AssistantContent,
    Conversation,
    Message,
    SystemContent,
    TextPart,
    ToolCall,
    ToolOutput,
    UserContent,
)

__all__ = ["TextPart", "SystemContent", "UserContent", "ToolCall", "ToolOutput",
           "AssistantBlock", "AssistantContent", "Message", "Conversation", "Role", "BlockType"]
