"""Redis client: the commands of many coroutines pipelined over one connection.

r = surge.redis.connect("redis://127.0.0.1:6379/0")   # lazy: connects on first use
await r.set("k", "v"); await r.get("k")               # redis-py's names and replies
"""

from surge.redis.client import Redis, connect, from_url
from surge.redis.cluster import (
    ClusterDownError,
    ClusterError,
    ClusterNode,
    CrossSlotTransactionError,
    RedisCluster,
    RedisClusterException,
    SlotNotCoveredError,
)
from surge.redis.cluster_pipeline import ClusterPipeline
from surge.redis.cluster_pubsub import ClusterPubSub
from surge.redis.connection_pool import BlockingConnectionPool, ConnectionPool
from surge.redis.encoder import Encoder
from surge.redis.errors import (
    AuthenticationError,
    BusyLoadingError,
    ConnectionError,
    DataError,
    ExecAbortError,
    LockError,
    LockNotOwnedError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    PubSubError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TimeoutError,
    WatchError,
)
from surge.redis.lock import Lock
from surge.redis.monitor import Monitor
from surge.redis.pipeline import Pipeline
from surge.redis.pubsub import PubSub
from surge.redis.sentinel import MasterNotFoundError, Sentinel, SlaveNotFoundError

__all__ = [
    "AuthenticationError",
    "BlockingConnectionPool",
    "BusyLoadingError",
    "ClusterDownError",
    "ClusterError",
    "ClusterNode",
    "ClusterPipeline",
    "ClusterPubSub",
    "ConnectionError",
    "ConnectionPool",
    "CrossSlotTransactionError",
    "DataError",
    "Encoder",
    "ExecAbortError",
    "Lock",
    "LockError",
    "LockNotOwnedError",
    "MasterNotFoundError",
    "Monitor",
    "NoPermissionError",
    "NoScriptError",
    "OutOfMemoryError",
    "Pipeline",
    "PubSub",
    "PubSubError",
    "ReadOnlyError",
    "Redis",
    "RedisCluster",
    "RedisClusterException",
    "RedisError",
    "ResponseError",
    "Sentinel",
    "SlaveNotFoundError",
    "SlotNotCoveredError",
    "TimeoutError",
    "WatchError",
    "connect",
    "from_url",
]
