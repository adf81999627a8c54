"""The reference package's ``apertus_format.models`` module: the drop-in dataclasses.

``from apertus_format.models import Message`` keeps working after
:func:`apertus_fast.install_as_apertus_format` (the objects are ``apertus_fast.Message``, ...).
"""

# what the reference's models module imports, so that its names are here too (a test's
# mock.patch("apertus_format.models.json") finds it)
import json  # noqa: F401
from dataclasses import dataclass  # noqa: F401
from typing import Any, Dict, List, Optional, Union  # noqa: F401

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
